"""What the apps above curation plug into it. Curation imports none of them: each registers here from its
``AppConfig.ready()``, and curation asks the registries.

- ``collection_context``: callables ``(collection) -> dict`` whose items join the collection page's context
  (releases: the header's "Releases (n)" count).
- ``media_policies``: callables ``(user, image_id) -> bool``; a user without the curator role sees an image's
  file when one of them says yes (annotation: an item of a campaign the annotator may work in).
- ``crowd_judgements``: callables ``(collection_ids, caption_ids) -> {caption id: judged good}``, the crowd's
  word on captions for the calibrated alignment filter (annotation: quality and good/common/bad campaigns).

A registry holds each callable once, in the order registered.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

collection_context: list[Callable[[object], dict]] = []
media_policies: list[Callable[[object, int], bool]] = []
crowd_judgements: list[Callable[[set[int], set[int]], dict[int, bool]]] = []


def _add(registry: list, func: Callable) -> Callable:
    if func not in registry:
        registry.append(func)
    return func


def register_collection_context(func: Callable[[object], dict]) -> Callable[[object], dict]:
    return _add(collection_context, func)


def register_media_policy(func: Callable[[object, int], bool]) -> Callable[[object, int], bool]:
    return _add(media_policies, func)


def register_crowd_judgements(func: Callable) -> Callable:
    return _add(crowd_judgements, func)


def collection_extras(collection) -> dict:
    """The collection page's context from the apps above curation."""
    extra: dict = {}
    for func in collection_context:
        extra.update(func(collection))
    return extra


def media_allowed(user, image_id: int) -> bool:
    """True when a registered policy lets ``user`` (not a curator) see the image's file."""
    return any(policy(user, image_id) for policy in media_policies)


def crowd_judged(collection_ids: Iterable[int], caption_ids: Iterable[int]) -> dict[int, bool]:
    """{caption id: judged good} from every registered source, later sources overriding earlier ones."""
    judged: dict[int, bool] = {}
    collections, captions = set(collection_ids), set(caption_ids)
    for source in crowd_judgements:
        judged.update(source(collections, captions))
    return judged


__all__ = [
    "collection_context", "media_policies", "crowd_judgements", "register_collection_context",
    "register_media_policy", "register_crowd_judgements", "collection_extras", "media_allowed", "crowd_judged",
]
