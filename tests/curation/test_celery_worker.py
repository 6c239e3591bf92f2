"""A real Celery worker consumes an import from Redis and the job's progress lands in the database."""
import os
import time

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.db import connections

from captionlab.celery import app
from curation.models import Collection, ImportJob
from curation.services import import_create

from ..conftest import REQUIRE_SERVICES
from .helpers import make_zip, png_bytes, sidecar_csv

REDIS_URL = os.environ.get("REDIS_URL", "")


@pytest.fixture
def redis_worker(transactional_db):
    if not REDIS_URL:
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but REDIS_URL is not set")
        pytest.skip("REDIS_URL is not set: no Redis broker for a real worker")
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    # The worker runs in a thread with its own database connection: close it after each task so
    # the test database can be dropped at the end of the session.
    task_postrun.connect(_close_connections)
    try:
        with start_worker(app, pool="solo", concurrency=1, perform_ping_check=False,
                          queues=["default"], shutdown_timeout=30):
            yield app
    finally:
        task_postrun.disconnect(_close_connections)
        app.conf.task_always_eager = saved


def _close_connections(**kwargs):
    connections.close_all()


@pytest.mark.worker
def test_a_worker_consuming_from_redis_runs_an_import_to_the_end(redis_worker, tmp_path):
    assert redis_worker.conf.broker_url.startswith("redis://")
    collection = Collection.objects.create(name="worker")
    path = make_zip(tmp_path / "w.zip", {
        "a.png": png_bytes(color=(1, 1, 1)), "b.png": png_bytes(color=(2, 2, 2)),
        "captions.csv": sidecar_csv([{"file": "a.png", "caption": "a black square"}]),
    })
    job = import_create(collection=collection, kind=ImportJob.Kind.IMAGES, source_path=str(path))
    # import_create enqueued on commit (autocommit here); wait for the worker to finish the job.
    for _ in range(200):
        job.refresh_from_db()
        if job.finished:
            break
        time.sleep(0.1)
    assert job.status == ImportJob.Status.DONE, job.error
    assert (job.rows_imported, job.captions_created) == (2, 1)
