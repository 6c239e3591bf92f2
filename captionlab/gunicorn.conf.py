"""gunicorn settings for the CaptionLab web processes (``gunicorn captionlab.wsgi -c captionlab/gunicorn.conf.py``).

Worker class and count, measured with benchmarks/annotate_load.py on the 2-core machine (8 s per
level, 5,000 tasks, the machine also busy with other work, load average 5-7), votes/s at 1 and
at 32 concurrent annotators:

    gthread, 3 workers x 4 threads    38 / 91
    sync,    8 workers                69 / 83   (no keep-alive: a TCP connection per request)
    gthread, 2 workers x 8 threads    46 / 112  <- the default

- ``gthread`` keeps HTTP connections alive and lets one thread run Python while others wait on
  PostgreSQL or Redis; with ``CONN_MAX_AGE`` each thread keeps its own database connection.
- One worker process per core: more processes only add context switches on 2 cores that
  PostgreSQL shares; 8 threads each give 16 requests in flight, enough to cover the waits on the
  database's commits (the vote's WAL flush) and 16 persistent connections, far under
  max_connections.
- The sync worker answers a lone annotator faster (no thread hand-off) but falls behind under
  concurrency, which is what the platform is for.

Every value can be overridden from the environment (GUNICORN_WORKERS, GUNICORN_THREADS,
GUNICORN_WORKER_CLASS, GUNICORN_BIND, default 127.0.0.1:8000) or on the command line.
"""
import ctypes
import ctypes.util
import gc
import multiprocessing
import os

# Loopback unless told otherwise: a reverse proxy on the same host reaches it, nothing else does. The
# compose web service binds 0.0.0.0 on its command line (its port is published through Docker).
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count()))
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
