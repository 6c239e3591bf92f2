"""Duplicate clusters of a semantic-duplicates step: reading them as groups, and the curator's keep-one /
keep-all decision on a group.

The filters (``semantic_duplicates`` on captions, ``semantic_duplicate_images`` on images) give every member
of a cluster the same ``details = {"cluster": <smallest member id>, "size", "members", "kept_id",
"similarity", "model"}``: the kept member's outcome is keep, the others' drop, except where the caption step
clusters for review (its default): the others are kept with the reason ``possible_duplicate`` and
``details["pair"]`` (the pair's score with the kept caption and the checks' reasons), and wait for the curator. ``cluster_keep`` records the
curator's choice as ordinary overrides (``services.decisions_override``), so the funnel, the reviews' history
and a release read it as they read any other override.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Value
from django.db.models.functions import Coalesce, NullIf
from django.urls import NoReverseMatch, reverse

from . import services
from .errors import IngestError
from .models import FilterDecision, FilterRun

CLUSTER_FILTERS = {"semantic_duplicates": "caption", "semantic_duplicate_images": "image"}
CLUSTERS_PER_PAGE = 20
KEEP_CHOICES = ("one", "all")


def is_cluster_step(snapshot: dict | None) -> bool:
    return bool(snapshot) and snapshot.get("filter") in CLUSTER_FILTERS


def member_target(snapshot: dict) -> str:
    """"caption" or "image": what a member of this step's clusters is."""
    return CLUSTER_FILTERS.get(snapshot.get("filter"), snapshot.get("target") or "caption")


def pairs_campaign_url(run: FilterRun, step: int) -> str:
    """The campaign form pre-filled for a same-meaning pairs campaign on this caption step's candidate pairs
    (the annotation app's page, found by its URL name; "" where it is not installed)."""
    if (run.snapshot or [])[step].get("filter") != "semantic_duplicates":
        return ""
    try:
        form = reverse("campaign-create")
    except NoReverseMatch:
        return ""
    return form + "?" + urlencode({"kind": "same_meaning", "collection": run.collection_id, "run": run.pk,
                                   "step": step, "name": f"Same meaning? run #{run.pk}"})


def _member_id(decision: FilterDecision, target: str) -> int | None:
    return decision.caption_id if target == "caption" else decision.image_id


@dataclass
class Cluster:
    id: int
    members: list  # FilterDecision rows with ``final`` (override, else outcome) and ``member_id``
    kept_id: int | None = None  # the member the filter kept
    similarity: float | None = None
    model: str = ""
    kept_now: list[int] = field(default_factory=list)  # members whose final outcome is keep

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def pending(self) -> bool:
        """Clustered for review and not reviewed yet: nothing dropped until the curator decides."""
        return any(d.reason == "possible_duplicate" and not d.override for d in self.members)

    @property
    def state(self) -> str:
        """"one" when exactly one member is kept, "all" when all are, "mixed" otherwise."""
        if len(self.kept_now) == len(self.members):
            return "all"
        return "one" if len(self.kept_now) == 1 else "mixed"


def _final():
    return Coalesce(NullIf("override", Value("")), "outcome")


def _clustered(run: FilterRun, step: int):
    return FilterDecision.objects.filter(run=run, step=step, details__cluster__isnull=False)


def cluster_page(run: FilterRun, step: int, page_number=None):
    """A page of the step's clusters of two or more members, largest first; each page's ``clusters`` holds
    ``Cluster`` rows with their members loaded (two queries a page, however large the run)."""
    counts = (_clustered(run, step).values("details__cluster").annotate(n=Count("pk")).filter(n__gte=2)
              .order_by("-n", "details__cluster"))
    page = Paginator(counts, CLUSTERS_PER_PAGE).get_page(page_number)
    ids = [row["details__cluster"] for row in page.object_list]
    page.clusters = clusters_by_id(run, step, ids)
    return page


def clusters_by_id(run: FilterRun, step: int, ids: list) -> list[Cluster]:
    target = member_target(run.snapshot[step])
    decisions = (_clustered(run, step).filter(details__cluster__in=ids).annotate(final=_final())
                 .select_related("image", "caption").order_by("pk"))
    grouped: dict = {cluster_id: [] for cluster_id in ids}
    for decision in decisions:
        decision.member_id = _member_id(decision, target)
        grouped.setdefault(decision.details.get("cluster"), []).append(decision)
    clusters = []
    for cluster_id, members in grouped.items():
        if not members:
            continue
        details = members[0].details or {}
        kept_id = details.get("kept_id")
        members.sort(key=lambda d: (d.member_id != kept_id, d.pk))  # the filter's choice first
        clusters.append(Cluster(id=cluster_id, members=members, kept_id=kept_id, similarity=details.get("similarity"),
                                model=details.get("model") or "",
                                kept_now=[d.member_id for d in members if d.final == FilterDecision.Outcome.KEEP]))
    return clusters


def cluster_keep(*, run: FilterRun, step: int, cluster: int, keep: str, member_id: int | None = None,
                 note: str = "", user=None) -> Cluster:
    """Keep one member of a cluster (``member_id``, default the one the filter kept) and drop the others, or
    keep them all; recorded as overrides with one note. IngestError: code "not_found" for a cluster or step
    that is not there, "invalid" for a bad choice."""
    if not 0 <= step < len(run.snapshot or []):
        raise IngestError("This run has no such step.", code="not_found")
    snapshot = run.snapshot[step]
    if not is_cluster_step(snapshot):
        raise IngestError(f"Step {step + 1} ({snapshot.get('filter')}) does not group duplicates into clusters.",
                          code="invalid")
    if keep not in KEEP_CHOICES:
        raise IngestError('keep is "one" or "all".', code="invalid")
    target = member_target(snapshot)
    members = list(_clustered(run, step).filter(details__cluster=cluster).select_related("run").order_by("pk"))
    if not members:
        raise IngestError(f"Step {step + 1} of run {run.pk} has no cluster {cluster}.", code="not_found")
    note = note or f"duplicate cluster {cluster}: keep {keep}"
    if keep == "all":
        keepers, droppers = members, []
    else:
        chosen = member_id if member_id is not None else (members[0].details or {}).get("kept_id")
        keepers = [d for d in members if _member_id(d, target) == chosen]
        if not keepers:
            raise IngestError(f"{target.capitalize()} {chosen} is not a member of cluster {cluster}.", code="invalid")
        droppers = [d for d in members if d not in keepers]
    with transaction.atomic():  # the group changes together or not at all
        services.decisions_override(decisions=keepers, outcome=FilterDecision.Outcome.KEEP, note=note, user=user)
        if droppers:
            services.decisions_override(decisions=droppers, outcome=FilterDecision.Outcome.DROP, note=note, user=user)
    return clusters_by_id(run, step, [cluster])[0]
