"""A run whose worker dies after an epoch resumes from its checkpoint and ends where an
uninterrupted run ends."""
import pytest
import torch

from modeling import engine, registry
from modeling.models import TrainingRun

from .conftest import WorkerKilled

pytestmark = pytest.mark.django_db


def test_killed_run_resumes_from_checkpoint(tiny):
    config = {"device": "cpu", "seed": 3, "epochs": 3}
    reference = engine.train(engine.create_run("test-tiny", config).pk)
    tiny.reset()

    run = engine.create_run("test-tiny", config)
    tiny.kill_after_epoch = 0  # dies when the second epoch starts
    with pytest.raises(WorkerKilled):
        engine.train(run.pk)
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.RUNNING and run.epoch == 1 and run.attempts == 1
    assert run.checkpoint.endswith("checkpoint-epoch000.pt")

    # the task is delivered again (acks_late): the same call continues from the checkpoint
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert run.attempts == 2 and run.epoch == 3
    assert tiny.epochs_started == [0, 1, 1, 2]  # epoch 0 is not trained again
    assert "Resumed from" in run.log and "after epoch 1" in run.log
    assert [h["loss"] for h in run.history] == [h["loss"] for h in reference.history]
    a = registry.load_version(run.model_version)[1].state_dict()
    b = registry.load_version(reference.model_version)[1].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_retry_after_failure_continues(tiny, eager_celery, django_capture_on_commit_callbacks):
    run = engine.create_run("test-tiny", {"device": "cpu", "seed": 3, "epochs": 2})
    tiny.kill_after_epoch = 0
    with pytest.raises(WorkerKilled):
        engine.train(run.pk)
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.FAILED, error="boom")
    run.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        engine.retry(run)
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.DONE and run.error == ""
    assert tiny.epochs_started == [0, 1, 1]
