"""A training run whose worker stopped beating reads "worker lost" on its page and in the API, with a
one-click Retry; a run whose worker beats does not. TRAINING_WORKER_LOST_AFTER_S is shortened here."""
import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from modeling import engine
from modeling.engine.progress import heartbeat
from modeling.models import TrainingRun


@pytest.fixture
def short_timeout(settings):
    settings.TRAINING_WORKER_LOST_AFTER_S = 2


def _running(beat_seconds_ago: float) -> TrainingRun:
    run = engine.create_run("test-tiny", {"device": "cpu"}, name="long run")
    now = timezone.now()
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.RUNNING, epochs=3, started_at=now - timedelta(hours=1),
                                                 heartbeat_at=now - timedelta(seconds=beat_seconds_ago))
    return TrainingRun.objects.get(pk=run.pk)


@pytest.mark.django_db
def test_a_run_without_a_beat_shows_worker_lost_and_retries_in_one_click(alice_client, tiny, short_timeout,
                                                                         django_capture_on_commit_callbacks):
    run = _running(beat_seconds_ago=5)
    fragment = alice_client.get(reverse("training-run-progress", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert ">worker lost</span>" in body and 'data-role="worker-lost"' in body
    assert reverse("training-run-retry", args=[run.pk]) in body
    assert alice_client.get(f"/api/training-runs/{run.pk}/").json()["worker_lost"] is True

    with django_capture_on_commit_callbacks() as queued:
        response = alice_client.post(reverse("training-run-retry", args=[run.pk]))
    assert response.status_code == 302 and len(queued) == 1  # the train task, sent after commit
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.QUEUED and run.heartbeat_at is None


@pytest.mark.django_db
def test_a_run_whose_worker_beats_is_not_lost_and_cannot_be_retried(alice_client, tiny, short_timeout):
    run = _running(beat_seconds_ago=0.5)
    body = alice_client.get(reverse("training-run-progress", args=[run.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert "worker lost" not in body and ">Training</span>" in body
    assert alice_client.get(f"/api/training-runs/{run.pk}/").json()["worker_lost"] is False
    response = alice_client.post(f"/api/training-runs/{run.pk}/retry/")
    assert response.status_code == 400 and "its worker is alive" in response.json()["detail"]
    assert TrainingRun.objects.get(pk=run.pk).status == TrainingRun.Status.RUNNING


@pytest.mark.django_db
def test_the_api_retries_a_lost_run(alice_client, tiny, short_timeout):
    run = _running(beat_seconds_ago=60)
    response = alice_client.post(f"/api/training-runs/{run.pk}/retry/")
    assert response.status_code == 200
    assert response.json()["status"] == "queued" and response.json()["worker_lost"] is False


@pytest.mark.django_db
def test_every_progress_write_is_a_beat(tiny):
    run = engine.train(engine.create_run("test-tiny", {"device": "cpu", "epochs": 1}).pk)
    assert run.status == TrainingRun.Status.DONE
    assert run.heartbeat_at is not None and timezone.now() - run.heartbeat_at < timedelta(minutes=1)


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_beats_while_the_worker_lives_and_stops_with_it(tiny, short_timeout):
    run = _running(beat_seconds_ago=60)
    assert engine.worker_lost(run)
    with heartbeat(run.pk, every=0.05):  # a phase without progress writes: data preparation, evaluation
        deadline = time.monotonic() + 10
        while engine.worker_lost(run) and time.monotonic() < deadline:
            time.sleep(0.05)
            run.refresh_from_db()
        assert not engine.worker_lost(run)
    run.refresh_from_db()  # the thread may have beaten once more between the last read and the block's end
    last = run.heartbeat_at
    time.sleep(0.3)
    run.refresh_from_db()
    assert run.heartbeat_at == last  # the thread stopped with the block
