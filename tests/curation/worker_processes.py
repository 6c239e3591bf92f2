"""Real Celery worker processes for the tests that kill one (tests/curation/slow_worker.py runs them):
queue a started run's chunks on a queue of the test's own, and start a worker with this test database."""
import os
import subprocess
import sys
from pathlib import Path

from django.db import connection

from curation.models import RunChunk

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("REDIS_URL", "")


def queue_chunks(run, queue: str) -> None:
    """Send every chunk of ``run`` to ``queue`` through the broker, even where the tests run tasks eagerly."""
    from config.celery import app
    from curation.tasks import filter_chunk

    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        for chunk in RunChunk.objects.filter(run=run):
            filter_chunk.apply_async((run.pk, chunk.index), queue=queue)
    finally:
        app.conf.task_always_eager = saved


def worker_env(**settings) -> dict:
    """The environment of a worker process on this test database and Redis, plus ``settings``."""
    db = connection.settings_dict
    return {**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "REDIS_URL": REDIS_URL, "LOG_LEVEL": "WARNING", **settings}


def start_worker(queues: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.curation.slow_worker", queues], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
