"""The steps of a training run that the single-process driver (driver.py) and each DDP rank (ddp.py) both
take: mark the run started, log its data, resume from its checkpoint, decide when a checkpoint is due,
evaluate the kept weights, save and register the version, or record the failure."""
from __future__ import annotations

from django.utils import timezone

from .. import evaluation, registry, verdicts
from ..models import ModelVersion, TrainingRun
from ..trainers.base import Prepared, TrainingError
from .checkpoints import load_checkpoint
from .cv import cross_validate, folds_wanted, split_labels
from .device import describe_device
from .loop import LoopState, select_best


def fail_run(run, progress, message):
    progress.log(f"Failed: {message}")
    progress.set(status=TrainingRun.Status.FAILED, error=message, finished_at=timezone.now())
    progress.flush(force=True)


def mark_started(run, progress, trainer, config, device) -> None:
    use_amp = device.type == "cuda" and bool(config.get("amp", True))
    progress.set(status=TrainingRun.Status.RUNNING, device=describe_device(device), epochs=int(config["epochs"]),
                 error="", started_at=run.started_at or timezone.now())
    progress.log(f"Attempt {run.attempts} on {describe_device(device)} with trainer {trainer.name}"
                 f"{' (mixed precision)' if use_amp else ''}; seed {int(config.get('seed', 0))}.")
    progress.flush(force=True)


def log_data(progress, prepared: Prepared) -> None:
    progress.set(data_hash=prepared.data_hash or "", data_summary=prepared.summary or {})
    for note in (prepared.summary or {}).get("notes", []):
        progress.log(str(note))
    progress.log(f"Data {prepared.data_hash[:12] if prepared.data_hash else '(no hash)'}: "
                 f"{_split_counts(prepared)}.")


def _split_counts(prepared: Prepared) -> str:
    summary = prepared.summary or {}
    parts = [f"{key} {value}" for key, value in summary.items() if isinstance(value, (int, float, str))]
    return ", ".join(parts[:12]) or "no summary"


def checkpoint_due(state: LoopState, config: dict) -> bool:
    """Every ``checkpoint_every`` epochs, and always at the last epoch (the end or an early stop), so a
    resumed run never trains past where the uninterrupted one stopped."""
    done = state.epoch + 1
    every = max(1, int(config.get("checkpoint_every", 1) or 1))
    return done % every == 0 or done >= int(config["epochs"]) or state.stopped_early


def resume_from_checkpoint(run, state: LoopState, model, optimizer, scaler, prepared, config, progress) -> None:
    """Load the run's checkpoint into the model, optimizer, scaler and ``state``; TrainingError when it
    was written for other data or another model."""
    saved = load_checkpoint(run.checkpoint)
    if prepared.data_hash and saved.get("data_hash") and saved["data_hash"] != prepared.data_hash:
        raise TrainingError("The training data changed since the checkpoint was written "
                            f"({saved['data_hash'][:12]} then, {prepared.data_hash[:12]} now); start a new run.",
                            code="mismatched_checkpoint")
    registry.load_state_dict_into(model, saved["model"], f"The checkpoint {run.checkpoint!r}")
    try:
        optimizer.load_state_dict(saved["optimizer"])
    except (ValueError, KeyError, RuntimeError) as exc:
        raise TrainingError(f"The optimizer state in {run.checkpoint!r} does not match: {exc}",
                            code="mismatched_checkpoint") from None
    if scaler is not None and saved.get("scaler"):
        scaler.load_state_dict(saved["scaler"])
    state.epoch = int(saved["epoch"]) + 1
    state.history = list(saved.get("history") or [])
    state.global_step = state.history[-1]["step"] if state.history else 0
    state.batch_size = min(state.batch_size, int(saved.get("batch_size") or state.batch_size))
    best = saved.get("best") or {}
    state.best_epoch, state.best_val_loss = best.get("epoch"), best.get("val_loss")
    state.stopped_early = bool(best.get("stopped_early"))
    if select_best(config) and state.best_epoch is not None:
        # None in the file means "the checkpoint's own weights" (see checkpoints._best_payload).
        state.best_state = best.get("model") or (saved["model"] if state.best_epoch == state.epoch else None)
    progress.log(f"Resumed from {run.checkpoint} after epoch {state.epoch}.")


def evaluate_model(trainer, model, prepared, config, device, state: LoopState, progress) -> dict:
    """The trainer's held-out metrics, the loop's facts (losses of the kept epoch, best epoch, early
    stop, epochs run), the cross-validation block when wanted and the verdict against the majority class."""
    model.eval()
    metrics = trainer.evaluate(model, prepared, device, config) or {}
    ends = [h for h in state.history if h.get("end")]
    kept = state.best_epoch if select_best(config) and state.best_epoch else state.epoch
    point = next((h for h in ends if h["epoch"] == kept), ends[-1] if ends else None)
    metrics.setdefault("train_loss", point["loss"] if point else None)
    if point and point.get("val_loss") is not None:
        metrics.setdefault("val_loss", point["val_loss"])
    metrics.update(best_epoch=state.best_epoch, stopped_early=state.stopped_early, epochs_run=state.epoch)
    k = folds_wanted(trainer, prepared, config)
    if k:
        metrics["cv"] = cross_validate(trainer, prepared, config, device, progress)
    judged = judge_model(trainer, model, prepared, config, device, metrics)
    if judged is not None:
        metrics["verdict"] = judged
        progress.log(f"Verdict: {judged['text']}.")
    return metrics


def judge_model(trainer, model, prepared, config, device, metrics: dict) -> dict | None:
    """The version's one verdict (modeling.verdicts): on the cross-validation folds pooled when the run was
    cross-validated, else on its held-out split; the majority-only verdict for a trainer that cannot give
    per-item probabilities; None for models that are not binary classifiers."""
    items = (metrics.get("cv") or {}).pop("items", None)
    seed = int(config.get("seed", 0))
    if items:
        where = f"{metrics['cv'].get('folds', len(items))}-fold cross-validation, folds pooled"
        return verdicts.judge_parts(items, basis="cv", where=where, seed=seed)
    if not metrics.get("report"):
        return None
    if not callable(getattr(trainer, "predict_proba", None)) or not callable(getattr(trainer, "labels", None)):
        return evaluation.verdict(metrics)
    y_true = split_labels(trainer, prepared.test)
    probs = list(trainer.predict_proba(model, prepared.test, device)) if y_true else []
    part = verdicts.fold_items(trainer, prepared, y_true, probs, float(config.get("threshold", 0.5)))
    return verdicts.judge_parts([part], basis="test", where="the run's held-out split", seed=seed)


def register_model(run, trainer, model, prepared, config, device, metrics, progress) -> None:
    artifact, sha = registry.save_artifact(run, model, prepared.info, config, trainer.name)
    version = registry.register_version(run, artifact, sha, trainer.name, config, prepared.info, metrics)
    progress.set(metrics=metrics, artifact=artifact)
    progress.log(f"Registered {version} ({artifact}).")
    progress.flush(force=True)
    extras = trainer.finish(run, model, prepared, device, config) or {}
    if extras:
        metrics = dict(metrics, extras=extras)
        ModelVersion.objects.filter(pk=version.pk).update(metrics=metrics)
    progress.set(status=TrainingRun.Status.DONE, metrics=metrics, finished_at=timezone.now())
    progress.log("Done.")
    progress.flush(force=True)
