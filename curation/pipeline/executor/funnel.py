"""The funnel (what entered each step, kept, dropped) and reconciling a finished run after overrides."""
from __future__ import annotations

from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, Value

from ...models import Caption, FilterDecision, FilterRun, RunChunk
from ..base import DROP, KEEP, NA


def reconcile(run_id: int, image_ids: list[int], transforms: dict | None = None) -> int:
    """After curators' overrides in a finished run, make the decisions after them follow the final
    outcomes. The chunk steps run again over these images honouring every override (an item a curator
    kept goes on to the next step; decisions already there, reviewed ones included, stay as they are),
    and what follows a final drop at any step is taken back, as ``finalise`` does for the run-level steps.
    Run-level steps are not run again: an item a curator brought back gets a "keep" decision with the
    reason ``not_judged`` at each of those after its override (a release keeps it there, and the funnel
    counts it, so that the funnel's last row is what a release of the run selects). Then the funnel is
    recounted. A reviewed decision's final outcome is honoured like an override, and a transform's text that
    a person set (a verified rewrite: ``details["verified"]``, annotation/verify_rewrites.py) goes on in place
    of the filter's. Returns the items the chunk steps
    went over (``transforms``: see ``process_chunk``). Run by the ``curation.filter_reconcile`` task, after the
    override commits."""
    from ...models import Review, decisions_of_images
    from .chunks import process_chunk
    from .runlevel import _keep_unjudged, _retract_later

    run = FilterRun.objects.get(pk=run_id)
    image_ids = sorted(set(image_ids))
    if run.status != FilterRun.Status.DONE or not image_ids:
        return 0
    with funnel_lock(run.pk):
        caption_ids = list(Caption.objects.filter(image_id__in=image_ids).values_list("pk", flat=True))
        of_images = FilterDecision.objects.filter(decisions_of_images(image_ids, caption_ids), run=run)
        overrides: dict[int, dict[tuple, str]] = {}
        reviewed = Exists(Review.objects.filter(decision_id=OuterRef("pk")))
        for position, image_id, caption_id, override, outcome in (
                of_images.filter(~Q(override="") | Q(reviewed))
                .values_list("step", "image_id", "caption_id", "override", "outcome")):
            overrides.setdefault(position, {})[(image_id, caption_id)] = override or outcome
        texts: dict[int, dict[tuple, str]] = {}
        transform_steps = [i for i, s in enumerate(run.snapshot) if s["transform"] and not s["run_level"]]
        for position, image_id, caption_id, text in (
                of_images.filter(step__in=transform_steps, caption__isnull=False, details__has_key="verified")
                .exclude(text_after="").values_list("step", "image_id", "caption_id", "text_after")):
            texts.setdefault(position, {})[(image_id, caption_id)] = text
        went_over = process_chunk(run, image_ids, overrides=overrides, texts=texts, transforms=transforms)
        for position, step in enumerate(run.snapshot):
            if step["run_level"]:
                _keep_unjudged(run, position, step, image_ids)
        for position, step in enumerate(run.snapshot):
            dropped = of_images.filter(FilterDecision.final_is(DROP), step=position)
            if step["target"] == "image":
                ids = list(dropped.filter(caption__isnull=True).values_list("image_id", flat=True))
            else:
                ids = list(dropped.filter(caption__isnull=False).values_list("caption_id", flat=True))
            _retract_later(run, position, step, ids, run_level_too=True)
        run.funnel = compute_funnel(run)
        run.save(update_fields=["funnel"])
    return went_over


# The class (first key) of the PostgreSQL advisory locks that serialise the writers of a run's funnel.
FUNNEL_LOCK_CLASS = 0x434C46  # "CLF"


@contextmanager
def funnel_lock(*run_ids: int):
    """A transaction in which no other writer of these runs' funnels runs: finalising a run (the funnel
    from the chunks' counts, unless an override was made) and overriding decisions (a review, then a
    recount). Without it an override committed while finalise reads could be missed by the funnel it
    saves, and two overrides' recounts could be saved in the wrong order. On PostgreSQL a transaction-level
    advisory lock per run (chunks, which update the run's row as they finish, do not wait for it);
    SQLite, the embedded default, runs one writer at a time anyway."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                for run_id in sorted(set(run_ids)):  # one order for everyone: no deadlock
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [FUNNEL_LOCK_CLASS, run_id % 2**31])
        yield


def _funnel_from_chunks(run: FilterRun, run_level: dict[str, dict[str, int]]) -> list[dict] | None:
    """The funnel as the sum of the done chunks' counts and the run-level steps' decisions: what
    ``compute_funnel`` counts (it reads each of the run's decisions, about 0.3 s per 20,000 captions with
    a dozen steps, after the last chunk, while the other workers wait for nothing). None when that sum
    may differ from the decisions: a done chunk without counts (done before counts were kept), or an
    override made while the run was going."""
    from ...models import Review

    totals: dict[int, dict[str, int]] = {}
    for counts in run.chunks.filter(status=RunChunk.Status.DONE).values_list("counts", flat=True):
        if counts is None:
            return None
        for position, outcomes in counts.items():
            row = totals.setdefault(int(position), {})
            for outcome, n in outcomes.items():
                row[outcome] = row.get(outcome, 0) + n
    for position, outcomes in run_level.items():
        totals[int(position)] = dict(outcomes)
    # Overrides are Reviews: those made since the run was created, then whether one is of this run's
    # decisions (by primary key). Joining the run's decisions to the reviews instead reads every decision
    # of the run (the planner has no statistics on a table this fresh): 0.2 s per 20,000 captions.
    recent = list(Review.objects.filter(created_at__gte=run.created_at).values_list("decision_id", flat=True)[:10_001])
    if len(recent) > 10_000 or (recent and FilterDecision.objects.filter(pk__in=recent, run_id=run.pk).exists()):
        return None
    return _funnel_rows(run, totals)


def _funnel_rows(run: FilterRun, counts: dict[int, dict[str, int]]) -> list[dict]:
    funnel = []
    for position, step in enumerate(run.snapshot):
        c = {KEEP: 0, DROP: 0, NA: 0, **counts.get(position, {})}
        entered = c[KEEP] + c[DROP] + c[NA]
        funnel.append({"step": position, "filter": step["filter"], "label": step.get("label", step["filter"]),
                       "target": step["target"], "entered": entered, "kept": c[KEEP], "dropped": c[DROP],
                       "not_applicable": c[NA], "warning": step_warning(entered, c[DROP])})
    return funnel


# A step that drops this share of what entered it (or everything) is flagged on the run's page, in the
# funnel, and in ``run_pipeline``'s output: usually a threshold set for another kind of collection (the
# papers' web-scale numbers on a first small collection, capitalisation rules on lower-case alt-text).
STEP_WARNING_SHARE = 0.9


def step_warning(entered: int, dropped: int) -> str:
    """The warning for a step that ``dropped`` of the ``entered`` items, or ""."""
    if not entered or dropped < STEP_WARNING_SHARE * entered:
        return ""
    if dropped >= entered:
        return f"dropped all {entered} items that entered: nothing goes on to the next step"
    return (f"dropped {dropped} of {entered} items that entered ({100 * dropped / entered:.1f}%): check its "
            "parameters against this collection")


def with_warnings(funnel: list[dict] | None) -> list[dict]:
    """The funnel's rows, each with its "warning" ("" when none; computed for funnels stored before
    warnings were kept)."""
    return [row if "warning" in row else {**row, "warning": step_warning(row.get("entered", 0), row.get("dropped", 0))}
            for row in funnel or []]


def funnel_warnings(funnel: list[dict] | None) -> list[dict]:
    """The funnel's rows that carry a warning."""
    return [row for row in with_warnings(funnel) if row["warning"]]


def compute_funnel(run: FilterRun) -> list[dict]:
    """Per step: how many items entered it and how many it kept, dropped, or found not applicable,
    counting curator overrides as the final word."""
    from django.db.models import Count

    from django.db.models.functions import Coalesce, NullIf

    counts: dict[int, dict[str, int]] = {}
    final = Coalesce(NullIf("override", Value("")), "outcome")
    for row in (FilterDecision.objects.filter(run=run).annotate(final=final).values("step", "final")
                .annotate(n=Count("pk"))):
        counts.setdefault(row["step"], {})[row["final"]] = row["n"]
    return _funnel_rows(run, counts)
