"""Early stopping, best-validation weights, sparse checkpoints, fit_in_memory and k-fold cross-validation,
on a logistic regression over synthetic 2-D points (a binary classifier with folds/labels/predict_proba).

A scripted validation loss (``val_script``) makes the best epoch and the stop exact: the script only
changes what validation reports, never the training, so "the weights of epoch 2" can be checked against
a run that trained two epochs."""
import hashlib

import pytest
import torch
from django.core.files.storage import default_storage
from torch import nn

from modeling import engine, evaluation, registry
from modeling.models import Kind, ModelVersion, TrainingRun
from modeling.trainers import register
from modeling.trainers.base import Prepared, Trainer

from .conftest import WorkerKilled

pytestmark = pytest.mark.django_db


def _points(n: int, positive_share: float, separation: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    ones = round(n * positive_share)
    y = torch.tensor([1.0] * ones + [0.0] * (n - ones))[torch.randperm(n, generator=g)]
    x = torch.randn(n, 2, generator=g) + (2 * y - 1)[:, None] * separation / 2
    return x, y


class LogisticTrainer(Trainer):
    """Logistic regression on points whose class shifts them along the diagonal."""

    kind = Kind.FLUENCY
    name = "test-logistic"
    default_config = {"epochs": 6, "batch_size": 16, "lr": 0.1, "n": 120, "positive_share": 0.5,
                      "separation": 2.5, "data_seed": 5}

    def __init__(self):
        self.reset()

    def reset(self):
        self.val_script = None  # validation loss per epoch (0-based), instead of the real one
        self.kill_after_epoch = None
        self.epochs_started = []
        self.on_predict = None
        self._val_epoch = 0

    def prepare(self, run):
        config = self.config(run.config)
        x, y = _points(int(config["n"]), float(config["positive_share"]), float(config["separation"]),
                       int(config["data_seed"]))
        n = len(y)
        a, b = int(n * 0.6), int(n * 0.8)
        digest = hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
        return Prepared(train=(x[:a], y[:a]), val=(x[a:b], y[a:b]), test=(x[b:], y[b:]), info={"inputs": 2},
                        data_hash=digest, summary={"train": a, "val": b - a, "test": n - b})

    def build(self, config, info):
        return nn.Linear(info["inputs"], 1)

    def batches(self, split, config, epoch, generator, train):
        x, y = split
        if train:
            self.epochs_started.append(epoch)
            if self.kill_after_epoch is not None and epoch > self.kill_after_epoch:
                self.kill_after_epoch = None  # only the first attempt dies
                raise WorkerKilled()
            order = torch.randperm(len(x), generator=generator)
        else:
            self._val_epoch = epoch
            order = torch.arange(len(x))
        size = int(config["batch_size"])
        return [(x[order[i:i + size]], y[order[i:i + size]]) for i in range(0, len(x), size)]

    def loss(self, model, batch, device, config):
        x, y = batch
        if self.val_script is not None and not model.training:
            return torch.tensor(float(self.val_script[self._val_epoch])), len(x)
        logits = model(x.to(device)).squeeze(-1)
        return nn.functional.binary_cross_entropy_with_logits(logits, y.to(device)), len(x)

    def labels(self, split):
        return [int(v) for v in split[1].tolist()] if len(split) else []

    def predict_proba(self, model, split, device):
        if self.on_predict:
            self.on_predict()
        with torch.no_grad():
            return torch.sigmoid(model(split[0].to(device)).squeeze(-1)).tolist()

    def evaluate(self, model, prepared, device, config):
        y = self.labels(prepared.test)
        report = evaluation.binary_report(y, self.predict_proba(model, prepared.test, device))
        seen = self.labels(prepared.train) + self.labels(prepared.val)
        flat = {k: report[k] for k in ("precision", "recall", "f1", "accuracy", "macro_f1")}
        return {**flat, "report": report,
                "baselines": {"majority": evaluation.majority_baseline(seen, y),
                              "random_guess": evaluation.binary_report(y, [0.5] * len(y))}}

    def folds(self, prepared, k, seed):
        x = torch.cat([prepared.train[0], prepared.val[0], prepared.test[0]])
        y = torch.cat([prepared.train[1], prepared.val[1], prepared.test[1]])
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
        chunks = order.chunk(k)
        out = []
        for i, held in enumerate(chunks):
            rest = torch.cat([c for j, c in enumerate(chunks) if j != i])
            out.append(Prepared(train=(x[rest], y[rest]), val=(x[:0], y[:0]), test=(x[held], y[held]),
                                info=prepared.info))
        return out


LOGISTIC = register(LogisticTrainer())
# Epoch 2 is the best; 3, 4 and 5 do not improve on it (0.8 > 0.7 and so on); 6 would.
SCRIPT = [1.0, 0.7, 0.8, 0.75, 0.9, 0.6, 0.5, 0.4, 0.3, 0.2]


@pytest.fixture
def logistic():
    LOGISTIC.reset()
    registry.clear_cache()
    yield LOGISTIC
    LOGISTIC.reset()


def _train(**config):
    return engine.train(engine.create_run("test-logistic", {"device": "cpu", "seed": 4, **config}).pk)


def _weights(run):
    return registry.load_version(run.model_version)[1].state_dict()


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _ends(run):
    return [h for h in run.history if h.get("end")]


def test_early_stopping_stops_after_patience_and_keeps_the_best_epochs_weights(logistic):
    logistic.val_script = SCRIPT
    run = _train(epochs=10, early_stopping_patience=3)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert [h["epoch"] for h in _ends(run)] == [1, 2, 3, 4, 5]
    assert run.metrics["best_epoch"] == 2 and run.metrics["stopped_early"] is True
    assert run.metrics["epochs_run"] == 5 and run.epoch == 5
    assert run.metrics["val_loss"] == pytest.approx(0.7)  # the kept epoch's, not the last one's
    assert [h["epoch"] for h in _ends(run) if h.get("best")] == [2]
    assert [h["epoch"] for h in _ends(run) if h.get("stopped_early")] == [5]
    assert "Stopped early after epoch 5" in run.log and "Restored the weights of epoch 2" in run.log
    assert run.model_version.metrics["best_epoch"] == 2

    logistic.reset()
    logistic.val_script = SCRIPT
    two_epochs = _train(epochs=2)
    assert _same(_weights(run), _weights(two_epochs))


def test_without_select_best_the_last_epoch_is_kept(logistic):
    logistic.val_script = SCRIPT
    run = _train(epochs=10, early_stopping_patience=3, select_best=False)
    assert run.metrics["best_epoch"] == 2 and run.metrics["epochs_run"] == 5
    assert "Restored" not in run.log
    five_epochs = _train(epochs=5, select_best=False)
    assert _same(_weights(run), _weights(five_epochs))
    assert not _same(_weights(run), _weights(_train(epochs=2)))


def test_without_patience_every_epoch_is_trained_and_the_best_still_selected(logistic):
    logistic.val_script = [1.0, 0.7, 0.8, 0.75]
    run = _train(epochs=4)
    assert run.metrics["epochs_run"] == 4 and run.metrics["stopped_early"] is False
    assert run.metrics["best_epoch"] == 2
    assert _same(_weights(run), _weights(_train(epochs=2)))


def test_a_run_without_validation_keeps_the_last_weights(logistic, monkeypatch):
    real = LogisticTrainer.prepare
    monkeypatch.setattr(LogisticTrainer, "prepare", lambda self, run: _no_val(real(self, run)))
    run = _train(epochs=3, early_stopping_patience=1)
    assert run.metrics["best_epoch"] is None and run.metrics["epochs_run"] == 3
    assert run.metrics["stopped_early"] is False and "val_loss" not in run.metrics
    assert "there is no validation split" in run.log and "Restored" not in run.log


def _no_val(prepared):
    prepared.val = []
    return prepared


@pytest.mark.parametrize("killed_after", [2, 3])
def test_a_killed_run_resumes_to_the_same_best_epoch_and_stop(logistic, killed_after):
    logistic.val_script = SCRIPT
    config = {"epochs": 10, "early_stopping_patience": 3, "checkpoint_every": 2}
    reference = _train(**config)
    logistic.reset()
    logistic.val_script = SCRIPT

    run = engine.create_run("test-logistic", {"device": "cpu", "seed": 4, **config})
    logistic.kill_after_epoch = killed_after
    with pytest.raises(WorkerKilled):
        engine.train(run.pk)
    run.refresh_from_db()
    # checkpoint_every 2: the last checkpoint is after epoch 2 (or 4), so epoch 3 (or 5) is trained again
    expected = "checkpoint-epoch001.pt" if killed_after == 2 else "checkpoint-epoch003.pt"
    assert run.checkpoint.endswith(expected)
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.DONE, run.error
    for key in ("best_epoch", "stopped_early", "epochs_run", "val_loss", "train_loss"):
        assert run.metrics[key] == reference.metrics[key], key
    assert [h["loss"] for h in run.history] == [h["loss"] for h in reference.history]
    assert _same(_weights(run), _weights(reference))


def test_checkpoint_every_writes_every_nth_epoch_and_the_last(logistic):
    run = _train(epochs=5, checkpoint_every=2)
    names = engine.list_checkpoints(run)
    assert [n.rsplit("/", 1)[1] for n in names] == ["checkpoint-epoch001.pt", "checkpoint-epoch003.pt",
                                                    "checkpoint-epoch004.pt"]
    assert run.checkpoint == names[-1]
    state = engine.load_checkpoint(run.checkpoint)
    assert state["best"]["epoch"] == run.metrics["best_epoch"]


def test_fit_in_memory_trains_like_a_run_without_rows_or_files(logistic):
    logistic.val_script = SCRIPT
    run = _train(epochs=10, early_stopping_patience=3)
    runs, files = TrainingRun.objects.count(), _stored_files()
    lines = []
    model = engine.fit_in_memory(LOGISTIC, LOGISTIC.prepare(run), run.config, device="cpu", echo=lines.append)
    assert _same(model.state_dict(), _weights(run))
    assert not model.training
    assert TrainingRun.objects.count() == runs and ModelVersion.objects.count() == 1
    assert _stored_files() == files
    assert "Epoch 1/10" in lines[0] and any("Stopped early after epoch 5" in line for line in lines)


def _stored_files():
    found, folders = set(), [""]
    while folders:
        folder = folders.pop()
        dirs, names = default_storage.listdir(folder)
        found.update(f"{folder}/{n}" for n in names)
        folders.extend(f"{folder}/{d}".lstrip("/") for d in dirs)
    return found


def test_a_small_data_set_is_cross_validated_and_judged(logistic):
    run = _train(cv_folds=4)
    assert run.status == TrainingRun.Status.DONE, run.error
    cv = run.metrics["cv"]
    assert cv["folds"] == 4 and len(cv["model"]["macro_f1"]["values"]) == 4
    assert sum(cv["confusion"].values()) == 120  # every item held out exactly once
    assert cv["model"]["macro_f1"]["mean"] > cv["majority"]["macro_f1"]["mean"] + 0.2
    assert cv["majority"]["macro_f1"]["mean"] <= 0.5
    for number in range(1, 5):
        assert f"Fold {number}/4: macro F1" in run.log
    verdict = run.metrics["verdict"]
    assert verdict["beats_majority"] is True and verdict["basis"] == "cv"
    assert f"Verdict: {verdict['text']}" in run.log
    stored = ModelVersion.objects.get(run=run).metrics
    assert stored["cv"] == cv and stored["verdict"] == verdict


@pytest.mark.parametrize("config", [{"cv_folds": 4, "cv_below": 120}, {"cv_folds": 1}, {}])
def test_cross_validation_only_when_asked_and_below_the_size(logistic, config):
    run = _train(**config)
    assert "cv" not in run.metrics and "Fold 1/" not in run.log
    assert run.metrics["verdict"]["basis"] == "test"


def test_a_run_cancelled_during_cross_validation_registers_nothing(logistic):
    calls = []

    def cancel_on_second_fold():
        calls.append(1)
        if len(calls) == 3:  # evaluate, fold 1, then fold 2
            TrainingRun.objects.update(status=TrainingRun.Status.CANCELLED)

    logistic.on_predict = cancel_on_second_fold
    run = _train(cv_folds=4)
    assert run.status == TrainingRun.Status.CANCELLED
    assert "Fold 1/4" in run.log and not ModelVersion.objects.exists()


def test_new_settings_are_validated(logistic):
    from modeling.trainers.base import TrainingError

    with pytest.raises(TrainingError, match="checkpoint_every must be a whole number of at least 1"):
        engine.create_run("test-logistic", {"checkpoint_every": 0})
    with pytest.raises(TrainingError, match="early_stopping_patience"):
        engine.create_run("test-logistic", {"early_stopping_patience": -1})
    with pytest.raises(TrainingError, match="select_best must be true or false"):
        engine.create_run("test-logistic", {"select_best": "yes"})
