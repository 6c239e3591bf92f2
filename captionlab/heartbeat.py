"""Heartbeats of long jobs that have no heartbeat of their own: imports, filter runs, releases,
exports and campaign aggregation (training runs and embedding jobs beat on their rows already).

While a worker runs a task of one of these jobs, a thread of that worker process writes the time
into the cache (Redis, shared by every process; local memory in the embedded default, where the
jobs run in the web process) every ``JOB_HEARTBEAT_SECONDS``. The job's pages and API read it back:

- ``alive``: a worker beat within ``JOB_WORKER_LOST_AFTER_S`` (default 120 s);
- ``lost``: the job is unfinished and its last beat is older than that: the worker died (a killed
  container, an OOM kill, a machine gone). The page says "worker lost" and offers a one-click retry
  (``retry``), which re-sends only the missing work; Celery itself re-delivers an unacknowledged
  task only after ``CELERY_VISIBILITY_TIMEOUT`` (1 h by default, README);
- ``waiting``: unfinished and never beaten: queued, no worker has taken it yet.

Tasks are mapped to jobs by name; the job's primary key is the task's first argument.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

# task name -> job kind; the job's pk is the task's first positional argument
TASK_JOBS = {
    "curation.run_import": "import",
    "curation.download_images": "import",
    "curation.filter_start": "run",
    "curation.filter_chunk": "run",
    "curation.filter_reconcile": "run",
    "curation.filter_finish": "run",
    "curation.release_freeze": "release",
    "curation.release_export": "export",
    "curation.release_export_verify": "export",
    "annotation.aggregate_campaign": "aggregation",
}
KINDS = sorted(set(TASK_JOBS.values()))

_lock = threading.Lock()
_active: dict[tuple[str, int], int] = {}  # (kind, pk) -> tasks of this process working on it
_thread: threading.Thread | None = None


def interval() -> float:
    return float(getattr(settings, "JOB_HEARTBEAT_SECONDS", 15))


def lost_after() -> float:
    return float(getattr(settings, "JOB_WORKER_LOST_AFTER_S", 120))


def _key(kind: str, pk: int) -> str:
    return f"heartbeat:{kind}:{int(pk)}"


def beat(kind: str, pk: int, now: float | None = None) -> None:
    cache.set(_key(kind, pk), now if now is not None else time.time(), timeout=max(int(lost_after() * 30), 3600))


def last_beat(kind: str, pk: int) -> float | None:
    value = cache.get(_key(kind, pk))
    return float(value) if value is not None else None


_wake = threading.Event()  # set when a job starts: the thread then sleeps on the current interval


def _beating():
    while True:
        _wake.wait(interval())
        _wake.clear()
        with _lock:
            jobs = list(_active)
        for kind, pk in jobs:
            try:
                beat(kind, pk)
            except Exception:  # noqa: BLE001 - a cache hiccup must not end the beats
                pass


def start(kind: str, pk: int) -> None:
    """A task of job (kind, pk) starts in this process: beat now and every interval until ``stop``."""
    global _thread
    beat(kind, pk)
    with _lock:
        _active[(kind, pk)] = _active.get((kind, pk), 0) + 1
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_beating, name="captionlab-heartbeat", daemon=True)
            _thread.start()
    _wake.set()


def stop(kind: str, pk: int) -> None:
    with _lock:
        left = _active.get((kind, pk), 0) - 1
        if left > 0:
            _active[(kind, pk)] = left
        else:
            _active.pop((kind, pk), None)
    beat(kind, pk)  # the last word: finished work is never mistaken for a dead worker


def _job_of(sender, args) -> tuple[str, int] | None:
    kind = TASK_JOBS.get(getattr(sender, "name", ""))
    if kind is None or not args:
        return None
    try:
        return kind, int(args[0])
    except (TypeError, ValueError):
        return None


def on_task_prerun(sender=None, args=None, **kwargs):
    job = _job_of(sender, args)
    if job:
        if job[0] == "aggregation":
            cache.set(_pending_key(job[1]), 1, timeout=24 * 3600)
        start(*job)


def on_task_postrun(sender=None, args=None, **kwargs):
    job = _job_of(sender, args)
    if job:
        stop(*job)
        if job[0] == "aggregation":
            cache.delete(_pending_key(job[1]))


@dataclass
class Health:
    state: str  # "alive", "lost", "waiting" or "" (finished)
    seconds_since_beat: float | None

    @property
    def lost(self) -> bool:
        return self.state == "lost"

    def as_dict(self) -> dict:
        return {"state": self.state, "seconds_since_beat": (round(self.seconds_since_beat, 1)
                                                           if self.seconds_since_beat is not None else None)}


def health(kind: str, pk: int, *, unfinished: bool, now: float | None = None) -> Health:
    if not unfinished:
        return Health("", None)
    last = last_beat(kind, pk)
    if last is None:
        return Health("waiting", None)
    age = max((now or time.time()) - last, 0.0)
    return Health("lost" if age > lost_after() else "alive", age)


# --- What each kind of job is, and how it is retried ---------------------------------------------

def job_object(kind: str, pk: int):
    """The row of a job, or None."""
    if kind == "import":
        from curation.models import ImportJob as model
    elif kind == "run":
        from curation.models import FilterRun as model
    elif kind == "release":
        from releases.models import Release as model
    elif kind == "export":
        from releases.models import ReleaseExport as model
    elif kind == "aggregation":
        from annotation.models import Campaign as model
    else:
        return None
    return model.objects.filter(pk=pk).first()


FINISHED = {"done", "failed", "frozen", "cancelled", "canceled"}


def _pending_key(pk: int) -> str:
    return f"heartbeat:aggregation-running:{int(pk)}"


def unfinished(kind: str, obj) -> bool:
    """Whether the job is still meant to be running. Aggregation has no status of its own: a pass
    marks the campaign while it runs (``on_task_prerun``) and clears the mark when it ends."""
    if obj is None:
        return False
    if kind == "aggregation":
        return bool(cache.get(_pending_key(obj.pk)))
    return getattr(obj, "status", "done") not in FINISHED


def job_health(kind: str, obj) -> Health:
    return health(kind, obj.pk, unfinished=unfinished(kind, obj))


def retry(kind: str, obj) -> str:
    """Re-send the work a lost worker left undone; returns what was done, in words."""
    if kind == "run":
        from curation.models import RunChunk
        from curation.tasks import filter_chunk, filter_finish, filter_start

        if obj.status == "finalising":  # the chunks were done; the run-level steps were not
            filter_finish.delay(obj.pk)
            return "the run-level steps were queued again"
        chunks = list(RunChunk.objects.filter(run=obj).exclude(status__in=["done", "failed"])
                      .values_list("index", flat=True))
        if not RunChunk.objects.filter(run=obj).exists():
            filter_start.delay(obj.pk)
            return "the run was started again"
        for index in chunks:
            filter_chunk.delay(obj.pk, index)
        if not chunks:  # every chunk finished: only the run-level steps were left
            filter_finish.delay(obj.pk)
        return f"{len(chunks)} unfinished chunk(s) queued again"
    if kind == "import":
        from curation.tasks import run_import

        run_import.delay(obj.pk)
        return "the import was queued again (rows already imported are skipped as duplicates)"
    if kind == "release":
        from releases.tasks import release_freeze

        release_freeze.delay(obj.pk)
        return "the release was queued again"
    if kind == "export":
        from releases.services import export_retry

        export_retry(obj)
        return "the export was queued again"
    if kind == "aggregation":
        from annotation.tasks import aggregate_campaign

        aggregate_campaign.delay(obj.pk)
        return "the aggregation was queued again"
    raise ValueError(f"unknown job kind {kind!r}")
