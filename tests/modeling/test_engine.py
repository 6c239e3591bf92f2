"""The training engine on a tiny synthetic regression (CPU, seconds)."""
import io

import pytest
import torch
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from modeling import engine, registry
from modeling.models import Kind, ModelVersion, TrainingRun
from modeling.trainers import get_trainer
from modeling.trainers.base import TrainingError

pytestmark = pytest.mark.django_db


def _run(tiny, **config):
    return engine.create_run("test-tiny", {"device": "cpu", "seed": 7, **config})


def _losses(history):
    return [(h["epoch"], h["step"], round(h["loss"], 10), h.get("val_loss")) for h in history]


def test_loss_falls_and_version_registered(tiny):
    run = engine.train(_run(tiny, epochs=6).pk)
    assert run.status == TrainingRun.Status.DONE, run.error
    ends = [h for h in run.history if h.get("end")]
    assert [h["epoch"] for h in ends] == [1, 2, 3, 4, 5, 6]
    assert ends[-1]["loss"] < ends[0]["loss"] * 0.6
    assert ends[-1]["val_loss"] < ends[0]["val_loss"]
    assert run.device == "cpu" and run.epoch == 6 and run.samples_per_second > 0
    assert "test_mse" in run.metrics and run.metrics["extras"] == {"version": 1}
    version = run.model_version
    assert version.version == 1 and version.kind == Kind.FLUENCY and not version.active
    assert version.config["trainer"] == "test-tiny" and version.config["info"] == {"inputs": 4}
    assert default_storage.exists(run.artifact) and default_storage.exists(run.checkpoint)
    # the registered weights rebuild a model that predicts like the trained one
    trainer, model, info = registry.load_version(version)
    x = torch.randn(5, 4)
    assert trainer is get_trainer("test-tiny") and not model.training
    assert model(x).shape == (5, 1)
    second = engine.train(_run(tiny, epochs=1).pk)
    assert second.model_version.version == 2


def test_same_seed_same_history_and_weights(tiny):
    a = engine.train(_run(tiny).pk)
    b = engine.train(_run(tiny).pk)
    c = engine.train(_run(tiny, seed=8).pk)
    assert _losses(a.history) == _losses(b.history)
    assert _losses(a.history) != _losses(c.history)
    wa = registry.load_version(a.model_version)[1].state_dict()
    wb = registry.load_version(b.model_version)[1].state_dict()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_cuda_requested_without_gpu_fails_clearly(tiny, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run = engine.train(_run(tiny, device="cuda").pk)
    assert run.status == TrainingRun.Status.FAILED
    assert run.error == "CUDA was requested but this worker has no GPU."
    with pytest.raises(TrainingError) as info:
        engine.pick_device("cuda")
    assert info.value.code == "no_cuda"
    assert engine.pick_device("auto").type == "cpu"


def test_too_few_labels_fails_with_message(tiny):
    tiny.too_few = True
    run = engine.train(_run(tiny).pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "Too few labels: 20 needed, 9 present." in run.error
    assert not ModelVersion.objects.exists()
    assert "Failed: Too few labels" in run.log


@pytest.mark.parametrize("cuda_error", [False, True])
def test_out_of_memory_retries_with_smaller_batch(tiny, cuda_error):
    tiny.oom_above, tiny.oom_cuda_error = 4, cuda_error
    run = engine.train(_run(tiny, batch_size=16, epochs=2).pk)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert 16 in tiny.seen_batch_sizes and 8 in tiny.seen_batch_sizes
    assert max(h["batch_size"] for h in run.history if h.get("end")) == 4
    assert "Out of memory at batch size 16; retrying epoch 1 with 8." in run.log
    # the result equals a run that used batch size 4 from the start
    tiny.reset()
    plain = engine.train(_run(tiny, batch_size=4, epochs=2).pk)
    assert _losses(plain.history) == _losses(run.history)


def test_out_of_memory_below_floor_fails(tiny):
    tiny.oom_above = 1
    run = engine.train(_run(tiny, batch_size=8, min_batch_size=4).pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "Out of memory at batch size 4" in run.error and "floor is 4" in run.error


def test_corrupt_checkpoint_is_a_clear_error(tiny):
    run = _run(tiny)
    run.checkpoint = default_storage.save("modeling/runs/x/bad.pt", ContentFile(b"not a zip, not a pickle"))
    run.status = TrainingRun.Status.RUNNING
    run.save()
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "is corrupt or not a PyTorch weights file" in run.error


class Gadget:
    """An arbitrary object: a weights_only load must refuse to build it."""

    def __reduce__(self):
        return (print, ("unpickled!",))


def test_pickled_object_in_checkpoint_is_refused(tiny, capsys):
    buffer = io.BytesIO()
    torch.save({"model": {}, "epoch": 0, "payload": Gadget()}, buffer)
    run = _run(tiny)
    run.checkpoint = default_storage.save("modeling/runs/x/evil.pt", ContentFile(buffer.getvalue()))
    run.status = TrainingRun.Status.RUNNING
    run.save()
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "was refused" in run.error and "weights_only=True" in run.error
    assert "unpickled!" not in capsys.readouterr().out


def test_mismatched_checkpoint_is_a_clear_error(tiny):
    buffer = io.BytesIO()
    torch.save({"model": {"0.weight": torch.zeros(3, 3)}, "optimizer": {}, "epoch": 0}, buffer)
    run = _run(tiny)
    run.checkpoint = default_storage.save("modeling/runs/x/other.pt", ContentFile(buffer.getvalue()))
    run.status = TrainingRun.Status.RUNNING
    run.save()
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "does not match the model" in run.error


def test_tampered_artifact_is_refused(tiny):
    run = engine.train(_run(tiny, epochs=1).pk)
    version = run.model_version
    default_storage.delete(version.artifact)
    default_storage.save(version.artifact, ContentFile(b"garbage"))
    registry.clear_cache()
    with pytest.raises(TrainingError, match="sha256 mismatch"):
        registry.load_version(version)


def test_activate_keeps_one_active_per_kind(tiny, alice):
    v1 = engine.train(_run(tiny, epochs=1).pk).model_version
    v2 = engine.train(_run(tiny, epochs=1).pk).model_version
    assert engine.active_version(Kind.FLUENCY) is None
    with pytest.raises(TrainingError, match="No active"):
        registry.load_version(kind=Kind.FLUENCY)
    engine.activate(v1, alice)
    assert engine.active_version(Kind.FLUENCY) == v1
    engine.activate(v2, alice)
    v1.refresh_from_db()
    assert not v1.active and engine.active_version(Kind.FLUENCY) == v2
    assert v2.activated_by == alice and v2.activated_at is not None
    assert ModelVersion.objects.filter(kind=Kind.FLUENCY, active=True).count() == 1
    assert registry.load_version(kind=Kind.FLUENCY)[2] == {"inputs": 4}


def test_create_run_validates_config(tiny):
    with pytest.raises(TrainingError, match="Unknown trainer"):
        engine.create_run("nope", {})
    with pytest.raises(TrainingError, match="epochs must be"):
        engine.create_run("test-tiny", {"epochs": 0})
    with pytest.raises(TrainingError, match="Unknown device"):
        engine.create_run("test-tiny", {"device": "tpu"})
    assert not TrainingRun.objects.exists()


def test_cancelled_run_is_not_trained(tiny):
    run = engine.cancel(_run(tiny))
    assert engine.train(run.pk).status == TrainingRun.Status.CANCELLED
    assert tiny.epochs_started == []


def test_commands_train_and_models(tiny):
    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command("train", "test-tiny", "--device", "cpu", "--epochs", "2", "--set", "hidden=5", stdout=out)
    text = out.getvalue()
    assert "Epoch 2/2" in text and "registered Fluency classifier v1" in text
    run = TrainingRun.objects.get()
    assert run.config["hidden"] == 5 and run.status == TrainingRun.Status.DONE
    out = io.StringIO()
    call_command("models", "activate", "fluency", "1", stdout=out)
    assert engine.active_version(Kind.FLUENCY).version == 1
    out = io.StringIO()
    call_command("models", stdout=out)
    assert "* fluency    v1" in out.getvalue()
    with pytest.raises(CommandError, match="No fluency version 9"):
        call_command("models", "activate", "fluency", "9")
    tiny.too_few = True
    with pytest.raises(CommandError, match="Too few labels"):
        call_command("train", "test-tiny", "--device", "cpu", stdout=io.StringIO())


def test_a_loss_that_becomes_nan_fails_the_run_naming_the_step(tiny):
    # lr 1e30 blows the weights up within a few steps; the losses are read a window at a time (one GPU sync per
    # history point), and the error still names the first step whose loss was not finite.
    run = engine.train(_run(tiny, lr=1e30, epochs=2).pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "The loss became" in run.error and "lower the learning rate" in run.error
    step = int(run.error.split("step ")[1].split(":")[0])
    assert 1 <= step <= 5
