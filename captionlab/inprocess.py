"""The embedded default's in-process executor: background jobs in a small thread pool of the web process.

Without ``REDIS_URL`` there is no broker and no worker. Celery's eager mode would run a queued task
inside the request that queued it, so "Start run" would hold the browser for the whole run and the
live progress bars would never be seen moving. Here a task queued in eager mode is handed to a
thread pool of ``CELERY_INPROCESS_WORKERS`` threads in the same process instead; the request
returns at once and the pages poll the job's row as they do with real workers. The task functions
are the same ones the workers run.

- Tasks that a background job queues itself (a filter run's chunks, an import's download chunks)
  run inline in that job's thread, in order, as eager mode always ran them.
- Each thread closes its database connection after a job, so SQLite's write lock and PostgreSQL's
  connections are not held between jobs.
- A job that raises is logged with its traceback; the job functions mark their own rows failed.
- Only the web process uses the pool (``config/wsgi.py`` and ``asgi.py`` call ``enable()``);
  management commands and the tests' client keep plain eager mode, inline and synchronous, as does
  ``CELERY_INPROCESS_WORKERS=0``.

With ``REDIS_URL`` set none of this runs: tasks go to the broker and the workers.
"""
from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

from celery import Task

logger = logging.getLogger(__name__)

_local = threading.local()
_enabled = False
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def enable() -> None:
    """Called by the WSGI/ASGI entry points: only a web process hands eager tasks to the pool.
    Management commands keep running them inline (they print their own progress and may queue
    work that reads a temporary folder they remove afterwards)."""
    global _enabled
    _enabled = True


def disable() -> None:
    global _enabled
    _enabled = False


def workers() -> int:
    """Threads of the pool; 0 (inline eager mode) outside a web process or when set to 0."""
    from django.conf import settings

    if not _enabled:
        return 0
    return max(int(settings.CELERY_INPROCESS_WORKERS or 0), 0)


def in_background_job() -> bool:
    """True inside a job this executor runs (its own queued tasks then run inline)."""
    return bool(getattr(_local, "active", False))


def _executor(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != size:
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="captionlab-job")
            _pool_size = size
        return _pool


def _run(task: Task, args, kwargs, task_id: str) -> None:
    from django.db import close_old_connections, connection

    _local.active = True
    close_old_connections()
    try:
        task.apply(args=args, kwargs=kwargs, task_id=task_id, throw=True)
    except Exception:
        logger.exception("background job %s (%s) failed", task.name, task_id)
    finally:
        _local.active = False
        connection.close()


_pending = 0
_pending_lock = threading.Lock()


def pending() -> int:
    """Jobs submitted and not finished yet."""
    with _pending_lock:
        return _pending


def submit(task: Task, args, kwargs) -> str:
    """Queue ``task`` on the pool; returns its task id at once."""
    global _pending
    with _pending_lock:
        _pending += 1
    task_id = str(uuid.uuid4())

    def job():
        global _pending
        try:
            _run(task, tuple(args or ()), dict(kwargs or {}), task_id)
        finally:
            with _pending_lock:
                _pending -= 1

    _executor(workers()).submit(job)
    return task_id


def wait_idle(timeout: float = 60.0) -> bool:
    """Block until every submitted job has finished (tests; a command that must not exit early)."""
    import time

    deadline = time.monotonic() + timeout
    while pending():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class InProcessTask(Task):
    """The project's Celery task class: eager tasks go to the in-process pool when it is on."""

    def apply_async(self, args=None, kwargs=None, task_id=None, **options):
        app = self._get_app()
        if app.conf.task_always_eager and workers() and not in_background_job():
            return self.AsyncResult(submit(self, args, kwargs))
        return super().apply_async(args=args, kwargs=kwargs, task_id=task_id, **options)
