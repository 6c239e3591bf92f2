"""A real Celery worker consumes an import from Redis and the job's progress lands in the database."""
import time

import pytest

from curation.models import Collection, ImportJob
from curation.services import import_create

from .helpers import make_zip, png_bytes, sidecar_csv


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
