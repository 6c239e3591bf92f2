"""A filter run whose worker is killed outright shows "worker lost" on its page and in the API within
the lost-after setting (seconds here, two minutes by default), and "Retry now" finishes it on another
worker without waiting for the broker's visibility timeout (captionlab/heartbeat.py)."""
import signal
import uuid

import pytest
from django.db import connection
from django.urls import reverse

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, RunChunk
from curation.pipeline import executor, registry

from ..conftest import REQUIRE_SERVICES
from .helpers import wait_until
from .slow_worker import SlowLength
from .worker_processes import REDIS_URL, queue_chunks, start_worker, worker_env

registry.FILTERS.setdefault(SlowLength.name, SlowLength)



@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_killed_workers_run_shows_worker_lost_and_retry_finishes_it(monkeypatch, settings, alice_client):
    if not REDIS_URL or connection.vendor != "postgresql":
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but PostgreSQL/Redis are not configured")
        pytest.skip("needs PostgreSQL (DATABASE_URL) and Redis (REDIS_URL): workers are separate processes")
    from curation.services import run_create

    settings.JOB_WORKER_LOST_AFTER_S = 3
    queue = f"lost-{uuid.uuid4().hex[:8]}"
    collection = Collection.objects.create(name="lost worker")
    for i in range(4):
        image = Image.objects.create(collection=collection, external_id=f"l{i}", status="missing")
        Caption.objects.create(image=image, text=f"a caption of image number {i}", origin="alt_text")
    pipeline = Pipeline.objects.create(name="slow", steps=[{"filter": "test_slow_length", "params": {"seconds": 2.0}}])
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 1)
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda *a: None)
    queue_chunks(run, queue)

    env = worker_env(JOB_HEARTBEAT_SECONDS="0.5")
    health = reverse("api-job-health", args=["run", run.pk])
    first = start_worker(queue, {**env, "SLOW_BLOCK_AFTER": "0"})  # its first chunk never ends
    try:
        wait_until(lambda: RunChunk.objects.filter(run=run, status="running").exists(), 60, "a chunk in progress")
        assert alice_client.get(health).json()["state"] == "alive"
        assert 'data-job-health="lost"' not in alice_client.get(run.get_absolute_url()).content.decode()
        first.send_signal(signal.SIGKILL)  # the whole worker, at once: no ack, no last beat
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    wait_until(lambda: alice_client.get(health).json()["state"] == "lost", 20, "the run to count as lost")
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'data-job-health="lost"' in page and "Worker lost" in page and "Retry now" in page
    assert FilterRun.objects.get(pk=run.pk).status == "running"  # nothing else noticed

    second = start_worker(f"{queue},filters", env)  # the retry goes to the run's usual queue
    try:
        response = alice_client.post(reverse("job-retry", args=["run", run.pk]), {"next": run.get_absolute_url()})
        assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
        wait_until(lambda: FilterRun.objects.get(pk=run.pk).status == "done", 120, "the retried run to finish")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    run.refresh_from_db()
    assert (run.chunks_done, run.chunks_failed) == (4, 0)
    assert FilterDecision.objects.filter(run=run).count() == 4
    assert alice_client.get(health).json()["state"] == ""
    # a finished run has nothing to retry: the API says so with a 409
    again = alice_client.post(reverse("api-job-retry", args=["run", run.pk]))
    assert again.status_code == 409 and "finished" in again.json()["message"]


def test_the_job_pages_and_api_are_for_curators_only(client, bob, db):
    collection = Collection.objects.create(name="x")
    run = FilterRun.objects.create(collection=collection, pipeline=Pipeline.objects.create(name="p", steps=[]),
                                   snapshot=[])
    client.force_login(bob)
    assert client.get(reverse("api-job-health", args=["run", run.pk])).status_code == 403
    assert client.post(reverse("job-retry", args=["run", run.pk])).status_code == 403
    assert client.get(reverse("api-job-health", args=["nonsense", run.pk])).status_code in (403, 404)
