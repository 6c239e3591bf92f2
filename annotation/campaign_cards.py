"""Cards that the apps above annotation add to a campaign's dashboard, server-rendered with the page (so it
works without JavaScript, as every form of the dashboard does). Annotation imports none of those apps: each
registers a provider from its ``AppConfig.ready()`` (modeling: the "Learning loop" card).

A provider is a callable ``(campaign) -> (template name, context dict) | None`` (None: no card for this
campaign). ``dashboard_context`` merges each card's context into the page's and lists the templates, in the
order registered, as ``campaign_cards``; ``annotation/campaigns/detail.html`` includes them.
"""
from __future__ import annotations

from collections.abc import Callable

providers: list[Callable[[object], tuple[str, dict] | None]] = []


def register(provider: Callable[[object], tuple[str, dict] | None]) -> Callable:
    if provider not in providers:
        providers.append(provider)
    return provider


def cards_context(campaign) -> dict:
    """``{"campaign_cards": [template, ...], **every card's context}`` for the dashboard."""
    templates: list[str] = []
    context: dict = {}
    for provider in providers:
        card = provider(campaign)
        if card is not None:
            template, extra = card
            templates.append(template)
            context.update(extra)
    return {"campaign_cards": templates, **context}


__all__ = ["providers", "register", "cards_context"]
