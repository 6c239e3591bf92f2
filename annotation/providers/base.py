"""The crowd-provider interface. The in-house pages, link-out marketplaces and Mechanical Turk all
serve the same Campaign / Task / Assignment / Vote model; a provider only publishes work where its
workers are, pulls back what they submitted, and pays them. A new marketplace is one new module
that subclasses ``CrowdProvider`` and registers itself with ``register``.

Every method is idempotent: a retried Celery task or a resumed sync calls it again with the same
arguments and the provider must neither publish twice nor pay twice ("already approved" is not an
error). Money goes through ``annotation.providers.money`` (ledger entries with unique tokens).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..models import Assignment, Campaign, ProviderJob, Worker
from . import money
from .errors import ProviderError

__all__ = ["CrowdProvider", "ProviderError", "Submission", "get_provider", "providers", "register"]


@dataclass
class Submission:
    """One unit of work a provider says a worker submitted."""

    external_assignment_id: str
    external_worker_id: str
    job_external_id: str
    status: str  # "submitted", "approved", "rejected"
    answer: dict = field(default_factory=dict)
    submitted_at: str | None = None


class CrowdProvider:
    name: str = ""
    label: str = ""
    has_api: bool = False  # pulled and paid through an API by the Celery beat sync

    # -- publishing ------------------------------------------------------------------------
    def publish(self, campaign: Campaign, *, progress=None) -> list[ProviderJob]:
        raise NotImplementedError

    def pause(self, campaign: Campaign) -> None:
        raise NotImplementedError

    def extend(self, campaign: Campaign, *, extra_assignments: int = 0, extra_seconds: int = 0) -> None:
        raise NotImplementedError

    def finish(self, campaign: Campaign) -> None:
        raise NotImplementedError

    # -- submissions and reviews -------------------------------------------------------------
    def pull_submissions(self, campaign: Campaign) -> list[Submission]:
        raise NotImplementedError

    def approve(self, assignment: Assignment, feedback: str = "") -> None:
        raise NotImplementedError

    def reject(self, assignment: Assignment, feedback: str) -> None:
        raise NotImplementedError

    def bonus(self, assignment: Assignment, amount_cents: int, reason: str, token: str) -> None:
        raise NotImplementedError

    # -- workers -------------------------------------------------------------------------------
    def block(self, worker: Worker, reason: str) -> None:
        raise NotImplementedError

    def qualify(self, campaign: Campaign, worker: Worker, passed: bool) -> None:
        """Record (and where the provider has them, grant) the campaign's qualification."""
        raise NotImplementedError

    # -- money ---------------------------------------------------------------------------------
    def fee_cents(self, amount_cents: int, *, kind: str, max_assignments: int = 1, campaign=None) -> int:
        """The provider's fee on a reward or bonus of ``amount_cents``."""
        return money.fee_cents(self.name, amount_cents, kind, max_assignments, campaign)

    # -- the worker's browser ------------------------------------------------------------------
    def finish_assignment(self, request, campaign: Campaign, assignment: Assignment):
        """What the worker's browser gets once their assignment is submitted (the votes are
        stored already). The default is a thank-you page; link-out shows the completion code and
        redirects to the marketplace, MTurk posts back to turkSubmitTo."""
        from django.shortcuts import render

        return render(request, "annotation/provider/finished.html",
                      {"campaign": campaign, "assignment": assignment, "provider": self})

    def credentials_status(self, campaign: Campaign) -> tuple[bool, str]:
        """(ready, a sentence for the curator) about the provider's credentials."""
        return True, "No credentials needed."


_REGISTRY: dict[str, CrowdProvider] = {}


def register(provider: CrowdProvider) -> CrowdProvider:
    _REGISTRY[provider.name] = provider
    return provider


def get_provider(name: str) -> CrowdProvider:
    from . import load_all

    load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ProviderError(f"Unknown crowd provider {name!r}.", code="unknown_provider") from None


def providers() -> dict[str, CrowdProvider]:
    from . import load_all

    load_all()
    return dict(_REGISTRY)
