"""Run-level steps: run once after every chunk, over the survivors of the earlier steps.

The survivors are read from the database with one statement per step, the run's images, the earlier
drops, the latest transformed text and entity types joined in SQL (no list of every id of the run in
this process), and streamed through a server-side cursor in batches of RUN_LEVEL_BATCH rows. A step
whose decision about a row depends only on that row, or only on the rows that share a key with it,
is decided batch by batch (``run_shard``): its memory does not grow with the run (rare entity types
count over one streamed pass first, ``prepare_run``; the topic model fits on a sample of that pass
and stores each batch's topics as it goes; near duplicates pack every image's hash into arrays of 16
bytes an image in that pass and solve the run there, see phash_groups.py; alignment scores the pass
batch by batch and keeps 12 bytes a caption for its cut-offs). The semantic duplicate
steps still receive every surviving row in one list (their vectors, 1.5 KB a caption, are searched
together) and return a decision for each; the executor streams what is around them, and writes
their decisions in batches.

A filter says how its rows may be split with the class attribute ``run_shard``:

- ``"row"``: each row is decided alone;
- ``"sha256"`` (or another row key): rows with the same value are decided together;
- None (the default): the whole run in one call.

A filter may also define ``prepare_run(rows)``, called first with the survivors as an iterator (one
streamed pass, for run-wide counts, in the order of its key), before ``decide_run`` is called batch
by batch. Filters that do not declare ``run_shard`` but are known to allow it are listed in SHARDS.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce

import curation.pipeline.executor.funnel as funnel  # the module, so that a test can replace compute_funnel

from ...models import Caption, FilterDecision, FilterRun, Image, Review, RunChunk, decisions_of_images
from ..base import DROP, KEEP, Decision
from .decisions import decision_tail, write_decisions
from .items import SKIP_ORIGINS
from .planning import instantiate

log = logging.getLogger(__name__)


# Rows read and decided at a time, for steps that allow batches; and decisions written at a time.
RUN_LEVEL_BATCH = 5000

# Filters (by name) that decide per row or per key without declaring ``run_shard`` themselves: each
# decides a row from that row alone (images_without_comments: its count of captions still alive) or
# from the rows with its sha256 (exact_duplicate: the lowest id of each file, and the same file in
# other collections, looked up by sha256).
SHARDS = {"images_without_comments": "row", "exact_duplicate": "sha256"}


def shard_of(step: dict, flt) -> str | None:
    """How a run-level step's rows may be split: "row", a row key, or None (whole run at once)."""
    declared = getattr(flt, "run_shard", None)
    return declared or SHARDS.get(step["filter"])


def _analyze() -> None:
    """Fresh planner statistics on PostgreSQL before a run-level step's statements. The chunks (or the
    step before) have just written decisions for every item; with the statistics of before the run, the planner takes the
    run's earlier drops for a handful of rows and scans all of them once per image (measured: a
    statement over 278,000 images still going after 13 minutes, against seconds with statistics).
    ANALYZE samples a fixed number of rows: a second or so, however large the tables."""
    connection = connections[FilterDecision.objects.db]
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {FilterDecision._meta.db_table}, {Caption._meta.db_table}, "
                       f"{Image._meta.db_table}, {RunChunk._meta.db_table}")


def finalise(run: FilterRun) -> None:
    filters = instantiate(run)
    for position, (step, flt) in enumerate(zip(run.snapshot, filters)):
        if not step["run_level"]:
            continue
        tally: dict[str, int] = {}  # {outcome: decisions} of this step
        _analyze()  # the chunks, or the run-level step before this one, have just written many decisions
        shard = shard_of(step, flt)
        if shard:
            if hasattr(flt, "prepare_run"):
                flt.prepare_run(_survivors(run, position, step, order=shard))
            topics = _RunTopics(flt, run, position) if step["filter"] == "lda_topics" else None
            for rows in _batches(_survivors(run, position, step, order=shard), shard):
                _write_run_level(run, position, step, rows, flt.decide_run(rows), tally)
                if topics:
                    topics.store_batch()
            if topics:
                topics.finish()
        else:
            rows = list(_survivors(run, position, step))
            results = flt.decide_run(rows) if rows else {}
            for start in range(0, len(rows), RUN_LEVEL_BATCH):
                _write_run_level(run, position, step, rows[start:start + RUN_LEVEL_BATCH], results, tally)
            del rows, results
        if tally.get(DROP):
            _retract_later(run, position, step, _dropped_at(run, position, step))
    with funnel.funnel_lock(run.pk):  # an override committed before this point is seen; one after it recounts
        run.funnel = funnel.compute_funnel(run)
        run.save(update_fields=["funnel"])


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
    from .chunks import process_chunk

    run = FilterRun.objects.get(pk=run_id)
    image_ids = sorted(set(image_ids))
    if run.status != FilterRun.Status.DONE or not image_ids:
        return 0
    with funnel.funnel_lock(run.pk):
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
        run.funnel = funnel.compute_funnel(run)
        run.save(update_fields=["funnel"])
    return went_over


class _RunTopics:
    """lda_topics' storage, batch by batch: the model fitted by ``prepare_run`` as the run's artifact of this
    step, then each decided batch's topic distributions as ImageTopics (no image's kept past its batch)."""

    def __init__(self, flt, run: FilterRun, position: int):
        from ..topics import save_run_model

        self.flt, self.artifact = flt, save_run_model(flt, run)
        if self.artifact is not None:
            run.artifacts = {**(run.artifacts or {}), str(position): self.artifact.pk}
            run.save(update_fields=["artifacts"])

    def store_batch(self) -> None:
        from ..topics import store_image_topics

        if self.artifact is not None:
            store_image_topics(self.artifact, self.flt.distributions)

    def finish(self) -> None:
        from ..topics import save_images_labelled

        if self.artifact is not None:
            save_images_labelled(self.artifact, self.flt.images_labelled)


def _write_run_level(run: FilterRun, position: int, step: dict, rows: list[dict], results: dict,
                     tally: dict[str, int]) -> None:
    """The decisions of ``rows`` (a row without one in ``results`` is kept), written once each."""
    key = "image_id" if step["target"] == "image" else "caption_id"
    decisions, seen = [], set()
    for row in rows:
        target_id = row[key]
        if target_id in seen:
            continue
        seen.add(target_id)
        decision = results.get(target_id) or Decision(KEEP, "")
        caption_id = row.get("caption_id") if key == "caption_id" else None
        decisions.append((run.pk, row["image_id"], caption_id,
                          *decision_tail(position, step, decision, row.get("text", ""), ())))
        tally[decision.outcome] = tally.get(decision.outcome, 0) + 1
    write_decisions(decisions)


def _batches(rows: Iterator[dict], shard: str) -> Iterator[list[dict]]:
    """Lists of about RUN_LEVEL_BATCH rows; with a key, rows that share it are never split (they come
    ordered by it)."""
    batch: list[dict] = []
    last = object()
    for row in rows:
        value = row.get(shard) if shard != "row" else None
        if len(batch) >= RUN_LEVEL_BATCH and (shard == "row" or value != last or not value):
            yield batch
            batch = []
        batch.append(row)
        last = value
    if batch:
        yield batch


def _dropped_at(run: FilterRun, position: int, step: dict):
    """The ids (a subquery, not a list) of what the run-level step at ``position`` dropped."""
    if step["target"] == "image":
        return (FilterDecision.objects.filter(run=run, step=position, outcome=DROP, caption__isnull=True)
                .values("image_id"))
    return (FilterDecision.objects.filter(run=run, step=position, outcome=DROP, caption__isnull=False)
            .values("caption_id"))


def _retract_later(run: FilterRun, position: int, step: dict, dropped: list[int], run_level_too: bool = False) -> int:
    """Take back what the chunks' steps after a run-level step decided on the items it dropped.

    The chunks run every per-chunk step before the run-level steps run over the whole run, so a step
    that comes after a run-level one in the pipeline (the text filters after the duplicate-image
    filters of conceptual-captions) has decided on captions whose images the run-level step then
    drops. In the pipeline's order those captions never reached it: their decisions there go, and the
    funnel and the review pages count what each step really received, as they do for the per-chunk
    steps (a caption dropped at one step gets no decision at the next). Decisions a curator has
    reviewed stay. Transformed captions made from them stay too, as records: the image's page shows
    that the run dropped them, and releases take a run's transformed text only where the run kept
    the raw caption. ``run_level_too``: the later run-level steps' decisions go as well (a finished run's
    override, see ``reconcile``). Returns how many decisions were taken back."""
    later = [i for i, s in enumerate(run.snapshot) if i > position and (run_level_too or not s["run_level"])]
    if not later:
        return 0
    subquery = not isinstance(dropped, (list, tuple, set))
    if subquery and not dropped.exists() or not subquery and not dropped:
        return 0
    retracted = 0
    unreviewed = ~Exists(Review.objects.filter(decision_id=OuterRef("pk")))
    # ``dropped``: a list of ids (a few images, from ``reconcile``), taken 5,000 at a time, or a subquery
    # (a run-level step's drops, any number): the database joins it, no id comes into this process.
    parts = [dropped] if subquery else [dropped[start:start + 5000] for start in range(0, len(dropped), 5000)]
    for ids in parts:
        # Two statements, each on its own index (an OR of both would read the run's decisions whole):
        # a dropped image's own rows (the image-level partial index), then its captions' (caption_id).
        if step["target"] == "image":
            scopes = [Q(caption__isnull=True, image_id__in=ids)]
            if subquery:
                scopes.append(Q(caption_id__in=Caption.objects.filter(image_id__in=ids).values("pk")))
            else:
                captions = list(Caption.objects.filter(image_id__in=ids).values_list("pk", flat=True))
                scopes += [Q(caption_id__in=captions[i:i + 5000]) for i in range(0, len(captions), 5000)]
        else:
            scopes = [Q(caption_id__in=ids)]
        for scope in scopes:
            doomed = FilterDecision.objects.filter(scope, unreviewed, run=run, step__in=later, override="")
            retracted += doomed._raw_delete(doomed.db)  # no signals, no cascade: reviewed decisions are excluded
    if retracted:
        log.info("run %s: step %s dropped items; %s decisions of later steps taken back", run.pk, position,
                 retracted)
    return retracted


def _run_images() -> str:
    """SQL selecting the ids of the images in a run's done chunks (one parameter: the run's id); the
    chunks keep them as JSON arrays."""
    table = RunChunk._meta.db_table
    if connections[RunChunk.objects.db].vendor == "postgresql":  # the database the query runs on
        return (f"SELECT (jsonb_array_elements_text(rc.item_ids))::bigint FROM {table} rc "  # noqa: S608
                "WHERE rc.run_id = %s AND rc.status = 'done'")
    return f"SELECT j.value FROM {table} rc, json_each(rc.item_ids) j WHERE rc.run_id = %s AND rc.status = 'done'"  # noqa: S608


@contextmanager
def _no_jit():
    """PostgreSQL's JIT off for the survivors' statement: its cost estimate (a correlated subquery per row)
    makes PostgreSQL compile it, which took longer (1.4 s) than running it over 28,000 images."""
    if connections[FilterDecision.objects.db].vendor != "postgresql":
        yield
        return
    connection = connections[FilterDecision.objects.db]
    with connection.cursor() as cursor:
        cursor.execute("SET jit = off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET jit")


def _survivors(run: FilterRun, position: int, step: dict, order: str | None = None, **options) -> Iterator[dict]:
    """``_survivor_stream`` with PostgreSQL's JIT off while it streams."""
    with _no_jit():
        yield from _survivor_stream(run, position, step, order, **options)


def _survivor_stream(run: FilterRun, position: int, step: dict, order: str | None = None, *,
               image_ids: list[int] | None = None, final: bool = False, undecided: bool = False) -> Iterator[dict]:
    """The items alive before ``position`` (not dropped by any earlier step, image drops included), as
    ``decide_run`` rows, streamed in batches of RUN_LEVEL_BATCH (a server-side cursor on PostgreSQL).
    ``order``: a row key to order them by (then the id), for steps decided per key. ``image_ids``: only
    these images and their captions; ``final``: a curator's override is the final word on a drop;
    ``undecided``: only items without a decision at ``position``."""
    in_run = RawSQL(_run_images(), [run.pk])
    earlier_drops = FilterDecision.objects.filter(run=run, step__lt=position)
    earlier_drops = earlier_drops.filter(FilterDecision.final_is(DROP) if final else Q(outcome=DROP))
    # Subqueries without the model's ordering (by run, which joins the runs to sort by their dates).
    image_phash = (FilterDecision.objects.filter(run=run, caption__isnull=True, image_id=OuterRef("image_pk"),
                                                 details__has_key="phash").order_by().values(p=KT("details__phash"))[:1])
    if step["target"] == "image":
        alive = (Caption.objects.filter(image_id=OuterRef("pk")).exclude(origin__in=SKIP_ORIGINS)
                 .exclude(Exists(earlier_drops.filter(caption_id=OuterRef("pk"))))
                 .order_by().values("image_id").annotate(n=Count("pk")).values("n"))
        own = (FilterDecision.objects.filter(run=run, step=position, caption__isnull=True, image_id=OuterRef("pk"))
               .order_by())
        images = Image.objects.filter(pk__in=in_run)
        if image_ids is not None:
            images = images.filter(pk__in=image_ids)
        if undecided:
            images = images.exclude(Exists(own))
        images = (images
                  .exclude(Exists(earlier_drops.filter(caption__isnull=True, image_id=OuterRef("pk"))))
                  .annotate(image_pk=F("pk"), alive=Coalesce(Subquery(alive, output_field=IntegerField()), Value(0)),
                            own_score=Subquery(own.values("score")[:1]), detail_phash=Subquery(image_phash))
                  .order_by(*([order] if order in ("sha256", "phash") else []), "pk")
                  .values_list("pk", "sha256", "phash", "detail_phash", "own_score", "alive"))
        for pk, sha256, phash, detail_phash, score, alive_count in images.iterator(chunk_size=RUN_LEVEL_BATCH):
            yield {"caption_id": None, "image_id": pk, "text": "", "entity_types": [], "sha256": sha256,
                   "phash": phash or detail_phash, "score": score, "captions_alive": alive_count}
        return
    earlier = FilterDecision.objects.filter(run=run, step__lt=position, caption_id=OuterRef("pk"))
    latest_text = earlier.exclude(text_after="").order_by("-step").values("text_after")[:1]
    types = earlier.filter(details__has_key="entity_types").order_by("-step").values("details")[:1]
    own = FilterDecision.objects.filter(run=run, step=position, caption_id=OuterRef("pk")).order_by()
    fields = {"sha256": "image__sha256", "phash": "image__phash"}
    captions = Caption.objects.filter(image_id__in=in_run)
    if image_ids is not None:
        captions = captions.filter(image_id__in=image_ids)
    if undecided:
        captions = captions.exclude(Exists(own))
    captions = (captions.exclude(origin__in=SKIP_ORIGINS)
                .exclude(Exists(earlier_drops.filter(caption__isnull=True, image_id=OuterRef("image_id"))))
                .exclude(Exists(earlier_drops.filter(caption_id=OuterRef("pk"))))
                .annotate(image_pk=F("image_id"), latest=Subquery(latest_text), types=Subquery(types),
                          own_score=Subquery(own.values("score")[:1]), detail_phash=Subquery(image_phash))
                .order_by(*([fields.get(order, order)] if order in ("image_id", "sha256", "phash") else []), "pk")
                .values_list("pk", "image_id", "text", "latest", "types", "image__sha256", "image__phash",
                             "detail_phash", "own_score"))
    for pk, image_id, text, latest, details, sha256, phash, detail_phash, score in captions.iterator(
            chunk_size=RUN_LEVEL_BATCH):
        if isinstance(details, str):
            details = json.loads(details)
        yield {"caption_id": pk, "image_id": image_id, "text": latest or text,
               "entity_types": (details or {}).get("entity_types") or [], "sha256": sha256,
               "phash": phash or detail_phash, "score": score}


def _keep_unjudged(run: FilterRun, position: int, step: dict, image_ids: list[int]) -> int:
    """Keep, at the run-level step ``position``, the items of these images that reached it without a
    decision there (brought back by a curator's override after the step ran; it is not run again).
    Returns how many were kept."""
    rows = list(_survivors(run, position, step, image_ids=image_ids, final=True, undecided=True))
    if not rows:
        return 0
    decision = Decision(KEEP, "not_judged", details={"note": "brought back by a curator after this run-level "
                                                              "step ran; not judged by it"})
    key = "image_id" if step["target"] == "image" else "caption_id"
    _write_run_level(run, position, step, rows, {row[key]: decision for row in rows}, {})
    return len(rows)


def _survivor_rows(run: FilterRun, position: int, step: dict) -> list[dict]:
    """Every item alive before ``position``, in one list (see ``_survivors``)."""
    return list(_survivors(run, position, step))
