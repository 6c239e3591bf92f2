"""The releases of a collection, for the collection page's link and the release list's ``?collection=`` filter
(page and API). A release names its collections in ``config["collections"]`` (``config.validate_config``) and,
when it selects from a filter run, the run in ``config["run"]``; either naming the collection counts, so a
release whose config predates the collections key is still found through its run."""
from __future__ import annotations

from django.db import connection
from django.db.models import Q

from curation.models import FilterRun
from releases.models import Release


def of_collection(collection_id: int) -> Q:
    """A ``Q`` over releases: those whose config names the collection or one of its filter runs."""
    runs = list(FilterRun.objects.filter(collection_id=collection_id).values_list("pk", flat=True))
    by_run = Q(config__run__in=runs) if runs else Q(pk__in=[])
    if connection.vendor == "postgresql":
        return Q(config__collections__contains=[collection_id]) | by_run
    # SQLite has no JSON containment: read the (small) configs
    named = [pk for pk, config in Release.objects.values_list("pk", "config")
             if isinstance(config, dict) and collection_id in (config.get("collections") or [])]
    return Q(pk__in=named) | by_run


def count_for(collection_id: int) -> int:
    return Release.objects.filter(of_collection(collection_id)).count()


def collection_context(collection) -> dict:
    """The collection page's "Releases (n)" link (registered in ``curation.extensions`` by the app's ready())."""
    return {"release_count": count_for(collection.pk)}
