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

Each kind of job is registered by the app that owns it (``register_job_kind`` in its
``AppConfig.ready()``): its model, the names of its tasks, and how to retry it. Tasks are mapped to
jobs by name; the job's primary key is the task's first argument. The kernel imports no app.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import models


@dataclass(frozen=True)
class JobKind:
    """A kind of long job, as its app registered it."""
    name: str
    model: type[models.Model]  # the job's row: a Django model whose pk is the first argument of the job's tasks
    tasks: tuple[str, ...]  # names of the Celery tasks that work on such a job
    retry: Callable[[object], str]  # re-sends the work a lost worker left undone; says what it did, in words
    has_status: bool = True  # False: no status of its own; unfinished only while a task of it runs


_KINDS: dict[str, JobKind] = {}
TASK_JOBS: dict[str, str] = {}  # task name -> job kind, filled by register_job_kind
KINDS: list[str] = []  # the registered kinds, sorted (kept in place: modules hold a reference)


def register_job_kind(kind: str, *, model: type[models.Model], tasks: Iterable[str], retry: Callable[[object], str],
                      has_status: bool = True) -> None:
    """Make a kind of long job known to the heartbeats, the job pages, the API and ``manage.py jobs``.
    Called by the owning app's ``AppConfig.ready()``; registering a kind again replaces it."""
    job = JobKind(kind, model, tuple(tasks), retry, has_status)
    previous = _KINDS.get(kind)
    if previous is not None:
        for name in previous.tasks:
            TASK_JOBS.pop(name, None)
    _KINDS[kind] = job
    for name in job.tasks:
        TASK_JOBS[name] = kind
    KINDS[:] = sorted(_KINDS)


def job_kind(kind: str) -> JobKind | None:
    return _KINDS.get(kind)


_lock = threading.Lock()
_active: dict[tuple[str, int], int] = {}  # (kind, pk) -> tasks of this process working on it
_thread: threading.Thread | None = None


def interval() -> float:
    return float(settings.JOB_HEARTBEAT_SECONDS)


def lost_after() -> float:
    return float(settings.JOB_WORKER_LOST_AFTER_S)


def beat_key(kind: str, pk: int) -> str:
    return f"heartbeat:{kind}:{int(pk)}"


def beat(kind: str, pk: int, now: float | None = None) -> None:
    cache.set(beat_key(kind, pk), now if now is not None else time.time(), timeout=max(int(lost_after() * 30), 3600))


def last_beat(kind: str, pk: int) -> float | None:
    value = cache.get(beat_key(kind, pk))
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
        if not _KINDS[job[0]].has_status:
            cache.set(_pending_key(*job), 1, timeout=24 * 3600)
        start(*job)


def on_task_postrun(sender=None, args=None, **kwargs):
    job = _job_of(sender, args)
    if job:
        stop(*job)
        if not _KINDS[job[0]].has_status:
            cache.delete(_pending_key(*job))


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


# --- What each kind of job is, and how it is retried (as its app registered it) ------------------

def job_object(kind: str, pk: int):
    """The row of a job, or None."""
    job = _KINDS.get(kind)
    if job is None:
        return None
    return job.model._default_manager.filter(pk=pk).first()


FINISHED = {"done", "failed", "frozen", "cancelled", "canceled"}


def _pending_key(kind: str, pk: int) -> str:
    return f"heartbeat:{kind}-running:{int(pk)}"


def unfinished(kind: str, obj) -> bool:
    """Whether the job is still meant to be running. A kind without a status of its own (aggregation)
    is marked while a task of it runs (``on_task_prerun``) and the mark is cleared when it ends."""
    if obj is None:
        return False
    job = _KINDS.get(kind)
    if job is not None and not job.has_status:
        return bool(cache.get(_pending_key(kind, obj.pk)))
    return getattr(obj, "status", "done") not in FINISHED


def job_health(kind: str, obj) -> Health:
    return health(kind, obj.pk, unfinished=unfinished(kind, obj))


def retry(kind: str, obj) -> str:
    """Re-send the work a lost worker left undone; returns what was done, in words."""
    job = _KINDS.get(kind)
    if job is None:
        raise ValueError(f"unknown job kind {kind!r}")
    return job.retry(obj)
