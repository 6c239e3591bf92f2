"""gunicorn settings for the CaptionLab web processes (``gunicorn config.wsgi -c config/gunicorn.conf.py``).

Worker processes and threads, measured with benchmarks/annotate_load.py on the 2-core machine that
also runs PostgreSQL, Redis, the Celery worker and the load generator (browser path, 1,000-task
campaign, 10 s per level, one run each on 2026-11-27): votes/s at 1 and at 32 annotators, whole-stack
CPU per vote at 32, web PSS after the load:

    processes x threads   votes/s (1 / 32)   CPU ms/vote   web PSS
    1 x 4                 121 / 166          7.9           124 MiB
    1 x 8                 128 / 212          6.6           126 MiB   <- the default on 2 or 3 cores
    1 x 16                148 / 186          7.4           130 MiB
    2 x 4                 149 / 269          6.6           158 MiB
    2 x 8                 117-140 / 212-267  6.5-8.1       160-164 MiB

- ``gthread`` keeps HTTP connections alive and lets one thread run Python while others wait on
  PostgreSQL or Redis. 8 threads keep one process's core busy; 16 only add contention for the GIL.
- **One process per two cores** (GUNICORN_WORKERS overrides): a process runs Python on one core at
  a time (the GIL), and a vote costs PostgreSQL about half the web's CPU (2.1-2.5 ms against
  4.4-4.9), so on a host that also runs the database, Redis and the Celery worker the other core
  is theirs. A second process on 2 cores bought 0-27% more votes/s and costs about 30 MiB:
  with ``preload_app`` the workers share the master's pages, but CPython 3.11 writes to every
  object it touches (reference counts, the specialising interpreter's caches), so each worker
  copies about 28-31 MiB of the master's pages (two thirds of them with at most 4 changed 8-byte
  words, measured by comparing the worker's and the master's pages through /proc/<pid>/pagemap).
- Usable cores are those the process may run on (its CPU affinity), capped by a cgroup CPU quota
  (``docker run --cpus``, Kubernetes limits) when there is one.
- The sync worker answers a lone annotator faster (no thread hand-off) but has no keep-alive and
  falls behind under concurrency, which is what the platform is for.

Every value can be overridden from the environment (GUNICORN_WORKERS, GUNICORN_THREADS,
GUNICORN_WORKER_CLASS, GUNICORN_BIND, default 127.0.0.1:8000) or on the command line.
"""
import ctypes
import ctypes.util
import gc
import math
import multiprocessing
import os

# Loopback unless told otherwise: a reverse proxy on the same host reaches it, nothing else does. The
# compose web service binds 0.0.0.0 on its command line (its port is published through Docker).
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")


def usable_cores(cgroup: str = "/sys/fs/cgroup") -> int:
    """The cores this process may run on (CPU affinity), capped by a cgroup v2 or v1 CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = multiprocessing.cpu_count()
    quota = _cgroup_quota(cgroup)
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _cgroup_quota(cgroup: str) -> float | None:
    """CPUs' worth of time the cgroup may use per period, or None without a limit."""
    try:  # v2: "<quota|max> <period>"
        fields = _read(os.path.join(cgroup, "cpu.max")).split()
    except OSError:
        try:  # v1: two files, -1 for no limit
            fields = [_read(os.path.join(cgroup, "cpu", name)).strip()
                      for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us")]
        except OSError:
            return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except (ValueError, IndexError):  # "max": no limit
        return None
    return quota / period if quota > 0 and period > 0 else None


workers = int(os.environ.get("GUNICORN_WORKERS") or max(1, usable_cores() // 2))
threads = int(os.environ.get("GUNICORN_THREADS", 8))
keepalive = 30  # seconds an idle keep-alive connection stays open (annotators pause to think)
preload_app = True  # import Django once in the master; workers fork with it (less memory, faster start)
max_requests = 20000  # recycle a worker now and then, jittered so they do not restart together
max_requests_jitter = 2000
timeout = 60
graceful_timeout = 30
accesslog = None
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "warning")


# --- Memory -------------------------------------------------------------------------------------
# glibc gives each thread that allocates its own malloc arena (up to 8 per core), and memory freed in
# one arena is not reused by another: 8 threads per worker each grew an arena of their own under load.
# Two arenas per process is what a thread mostly waiting on PostgreSQL needs. MALLOC_ARENA_MAX in the
# environment, when set, wins (glibc reads it when the process starts).
M_ARENA_MAX = -8  # glibc's mallopt parameter number
MALLOC_ARENAS = int(os.environ.get("GUNICORN_MALLOC_ARENAS", 2))


def _limit_malloc_arenas() -> None:
    if os.environ.get("MALLOC_ARENA_MAX") or MALLOC_ARENAS <= 0:
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS)
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to limit
        pass


_limit_malloc_arenas()  # in the master, before the application is loaded and the workers fork

# With --preload the master imports Django and every view, and the workers share those pages. The
# cyclic garbage collector writes to every object it examines, which would copy the shared pages
# into each worker one by one: the master collects nothing while importing, and freezes what it
# holds before each fork, so later collections (in the workers and in the master) skip it.
gc.disable()


def pre_fork(server, worker):
    gc.freeze()  # everything the master holds now is left alone by later collections
    gc.enable()  # in the master and, inherited, in the worker about to fork
