"""A run's life: start (fit, chunks queued), each chunk claimed and processed, finish (run-level steps, the
funnel), and its progress. Called by the Celery tasks."""
from __future__ import annotations

import logging
import time

from django.db import transaction
from django.db.models import F
from django.utils import timezone

import curation.pipeline.executor.runlevel as runlevel  # the module, so that a test can replace finalise
from captionlab.gcpause import cyclic_gc_paused

from ...models import FilterRun, RunChunk
from .. import registry
from .chunks import process_chunk
from .planning import chunk_image_ids, fit

log = logging.getLogger(__name__)


# --- Orchestration (called by the Celery tasks) ----------------------------------------------------

def start(run_id: int, *, enqueue) -> FilterRun:
    """Fit what needs fitting, split the collection into chunks and queue them with ``enqueue``."""
    run = FilterRun.objects.get(pk=run_id)
    if run.status not in (FilterRun.Status.QUEUED, FilterRun.Status.FITTING):
        return run
    run.started_at = run.started_at or timezone.now()
    filters = [registry.get(step["filter"]) for step in run.snapshot]
    if any(cls.fits for cls in filters):
        run.status = FilterRun.Status.FITTING
        run.save(update_fields=["status", "started_at"])
        fit(run)
    with transaction.atomic():
        # Chunks are made as the grouped query streams the collection's images, and saved 200 at a time.
        count = images = captions = 0
        pending: list[RunChunk] = []
        for ids, in_chunk in chunk_image_ids(run):
            pending.append(RunChunk(run=run, index=count, item_ids=ids))
            count, images, captions = count + 1, images + len(ids), captions + in_chunk
            if len(pending) >= 200:
                RunChunk.objects.bulk_create(pending, ignore_conflicts=True)
                pending = []
        RunChunk.objects.bulk_create(pending, ignore_conflicts=True)
        FilterRun.objects.filter(pk=run.pk).update(
            status=FilterRun.Status.RUNNING, chunks_total=count, items_total=images + captions,
            started_at=run.started_at,
        )
    run.refresh_from_db()
    if not count:
        finish(run.pk)
    for index in (run.chunks.filter(status__in=[RunChunk.Status.PENDING, RunChunk.Status.RUNNING])
                  .values_list("index", flat=True).iterator(chunk_size=10_000)):
        transaction.on_commit(lambda index=index: enqueue(run.pk, index))
    return run


_no_cyclic_gc = cyclic_gc_paused  # see captionlab/gcpause.py for why


def run_chunk(run_id: int, index: int) -> str:
    """Claim and process one chunk. Returns the chunk's status. Raises to ask for a retry."""
    claimed = RunChunk.objects.filter(
        run_id=run_id, index=index, status__in=[RunChunk.Status.PENDING, RunChunk.Status.RUNNING]
    ).update(status=RunChunk.Status.RUNNING, attempts=F("attempts") + 1)
    chunk = RunChunk.objects.select_related("run").get(run_id=run_id, index=index)
    if not claimed:
        return chunk.status
    started = time.perf_counter()
    with transaction.atomic(), _no_cyclic_gc():  # the decisions and the chunk's being done commit together
        processed = process_chunk(chunk.run, chunk.item_ids, first_attempt=chunk.attempts == 1)
        seconds = time.perf_counter() - started
        done = RunChunk.objects.filter(pk=chunk.pk, status=RunChunk.Status.RUNNING).update(
            status=RunChunk.Status.DONE, seconds=seconds, error="")
        if done:
            FilterRun.objects.filter(pk=run_id).update(chunks_done=F("chunks_done") + 1,
                                                       items_done=F("items_done") + processed)
    _maybe_finish(run_id)
    return RunChunk.Status.DONE


def chunk_failed(run_id: int, index: int, error: str) -> None:
    """A chunk that kept failing: record why, count it, and let the rest of the run complete."""
    with transaction.atomic():
        marked = RunChunk.objects.filter(run_id=run_id, index=index).exclude(
            status__in=[RunChunk.Status.DONE, RunChunk.Status.FAILED]).update(status=RunChunk.Status.FAILED, error=error[:5000])
        if marked:
            FilterRun.objects.filter(pk=run_id).update(chunks_failed=F("chunks_failed") + 1)
    _maybe_finish(run_id)


def _maybe_finish(run_id: int) -> None:
    claimed = FilterRun.objects.filter(
        pk=run_id, status=FilterRun.Status.RUNNING,
        chunks_total__lte=F("chunks_done") + F("chunks_failed"),
    ).update(status=FilterRun.Status.FINALISING)
    if claimed:
        finish(run_id)


def finish(run_id: int) -> None:
    run = FilterRun.objects.get(pk=run_id)
    try:
        runlevel.finalise(run)
    except Exception as exc:
        log.exception("finalising run %s failed", run_id)
        FilterRun.objects.filter(pk=run_id).update(status=FilterRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}",
                                                   finished_at=timezone.now())
        return
    failed = run.chunks.filter(status=RunChunk.Status.FAILED).count()
    FilterRun.objects.filter(pk=run_id).update(
        status=FilterRun.Status.DONE, finished_at=timezone.now(),
        error=f"{failed} chunk(s) failed; see the chunks for their errors" if failed else "",
    )


# What a run is doing, for the page and the terminal: the chunks' share of the bar is all there is to show
# while they run; after them the run-level steps run over the whole run in one worker, with no count of
# their own, and the bar says so instead of sitting at 99%.
PHASES = {
    FilterRun.Status.QUEUED: ("queued", "Queued"),
    FilterRun.Status.FITTING: ("fitting", "Fitting corpus statistics"),
    FilterRun.Status.RUNNING: ("chunks", "Filtering chunks"),
    FilterRun.Status.FINALISING: ("run_level", "Run-level steps (duplicates, rare types, topics) over the whole run"),
    FilterRun.Status.DONE: ("done", "Done"),
    FilterRun.Status.FAILED: ("failed", "Failed"),
}


def progress(run: FilterRun) -> dict:
    """Chunks done, items/s and ETA, from what the database says (same for page and terminal). A finished
    run's rate is its items over its duration (started to finished), frozen; the ETA counts the chunks'
    items only, and is None once they are done (the run-level steps have no count to extrapolate)."""
    end = run.finished_at if run.finished and run.finished_at else timezone.now()
    elapsed = (end - run.started_at).total_seconds() if run.started_at else 0.0
    rate = run.items_done / elapsed if elapsed > 0 and run.items_done else 0.0
    remaining = max(run.items_total - run.items_done, 0)
    phase, label = PHASES.get(run.status, (run.status, run.get_status_display()))
    chunks_left = run.status == FilterRun.Status.RUNNING and remaining
    return {"percent": run.percent, "chunks_done": run.chunks_done, "chunks_failed": run.chunks_failed,
            "chunks_total": run.chunks_total, "items_done": run.items_done, "items_total": run.items_total,
            "items_per_second": round(rate, 1), "eta_seconds": round(remaining / rate) if rate and chunks_left else None,
            "phase": phase, "phase_label": label, "run_level": phase == "run_level",
            "elapsed_seconds": round(elapsed, 1)}
