"""A run on two CPU processes (DistributedDataParallel over gloo, launched by torchrun): the loss falls,
rank 0 checkpoints, a rank that dies fails the run cleanly, and the retried run resumes from the
checkpoint and registers a version."""
import os

import pytest
from django.db import connection

from modeling import engine
from modeling.models import ModelVersion, TrainingRun

from ..conftest import REQUIRE_SERVICES
from . import ddp_trainer  # noqa: F401 - registers test-ddp-tiny in this process too


@pytest.mark.django_db(transaction=True)
def test_two_gloo_processes_learn_and_a_dead_rank_resumes_from_the_checkpoint(monkeypatch, settings, tmp_path):
    if connection.vendor != "postgresql":
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but PostgreSQL is not configured")
        pytest.skip("needs PostgreSQL (DATABASE_URL): the ranks are separate processes")
    db = connection.settings_dict
    # The ranks read this test's database and write checkpoints into this test's storage.
    monkeypatch.setenv("DATABASE_URL", f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}")
    monkeypatch.setenv("MEDIA_ROOT", str(settings.MEDIA_ROOT))
    monkeypatch.setenv("TORCH_THREADS", "2")  # one thread per rank on the 2-core machine
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    died = tmp_path / "rank1-died"
    config = {"device": "cpu", "ddp_processes": 2, "epochs": 4, "seed": 2, "n": 192, "die_file": str(died)}
    run = engine.create_run("test-ddp-tiny", config)

    run = engine.train(run.pk)
    assert died.exists()
    assert run.status == TrainingRun.Status.FAILED and run.error.startswith("A training process stopped"), run.error
    assert "Training on 2 processes (DistributedDataParallel, gloo)" in run.log
    assert run.checkpoint and run.epoch >= 2  # rank 0 wrote the epochs both ranks finished

    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.QUEUED, error="", finished_at=None)
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.DONE, (run.error, run.log[-3000:])
    assert "Resumed from" in run.log and run.attempts == 2
    ends = [h for h in run.history if h.get("end")]
    assert [h["epoch"] for h in ends] == [1, 2, 3, 4]
    assert ends[-1]["loss"] < ends[0]["loss"]
    assert run.metrics["ddp"] == {"processes": 2, "backend": "gloo"}
    assert ModelVersion.objects.filter(run=run).exists()
    assert os.environ.get("CAPTIONLAB_DDP_RANK") is None  # the test process never became a rank
