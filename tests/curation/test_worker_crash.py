"""A worker killed in the middle of a filter run loses nothing: a second worker finishes the run
and every decision is written exactly once (acks_late + idempotent upserts)."""
import signal
import time
import uuid

import pytest
from django.db import connection

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, RunChunk
from curation.pipeline import executor, registry

from ..conftest import REQUIRE_SERVICES
from .helpers import wait_until
from .slow_worker import SlowLength
from .worker_processes import REDIS_URL, queue_chunks, start_worker, worker_env

registry.FILTERS.setdefault(SlowLength.name, SlowLength)



@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_run_loses_nothing_and_writes_each_decision_once(monkeypatch):
    if not REDIS_URL or connection.vendor != "postgresql":
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but PostgreSQL/Redis are not configured")
        pytest.skip("needs PostgreSQL (DATABASE_URL) and Redis (REDIS_URL): workers are separate processes")

    queue = f"crash-{uuid.uuid4().hex[:8]}"  # a queue of our own: no other worker may take these tasks
    collection = Collection.objects.create(name="crash")
    for i in range(6):
        image = Image.objects.create(collection=collection, external_id=f"c{i}", status="missing")
        Caption.objects.create(image=image, text=f"a caption of image number {i}", origin="alt_text")
        Caption.objects.create(image=image, text="short", origin="alt_text")
    pipeline = Pipeline.objects.create(name="slow", steps=[{"filter": "test_slow_length", "params": {"seconds": 1.0}}])
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 1)
    from curation.services import run_create

    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda *a: None)
    queue_chunks(run, queue)
    env = worker_env(CELERY_VISIBILITY_TIMEOUT="3")
    first = start_worker(queue, {**env, "SLOW_BLOCK_AFTER": "1"})  # its second chunk never ends
    try:
        wait_until(lambda: RunChunk.objects.filter(run=run, status="done").count() >= 1
              and RunChunk.objects.filter(run=run, status="running").exists(), 60, "a chunk in progress")
        first.send_signal(signal.SIGKILL)  # no warm shutdown, no ack: the message stays unacknowledged
        first.wait(10)
        interrupted = RunChunk.objects.get(run=run, status="running")
        # Redis re-delivers an unacknowledged task once its visibility timeout has passed; the
        # next worker restores such tasks when it starts.
        time.sleep(4)
        second = start_worker(queue, env)
        try:
            wait_until(lambda: FilterRun.objects.get(pk=run.pk).status == "done", 120, "the run to finish")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(20)
    finally:
        if first.poll() is None:
            first.kill()
    run.refresh_from_db()
    assert (run.chunks_done, run.chunks_failed) == (6, 0)
    assert FilterDecision.objects.filter(run=run).count() == 12
    assert FilterDecision.objects.filter(run=run, outcome="drop", reason="too_short").count() == 6
    interrupted.refresh_from_db()
    assert interrupted.status == "done" and interrupted.attempts >= 2
