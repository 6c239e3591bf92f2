"""The model registry: save a run's artifact, register it as a ModelVersion, activate one version per
kind, and load a version back into a model.

Every weights file is read with ``torch.load(..., weights_only=True)``: an artifact or checkpoint that
holds anything but tensors and plain containers is refused, never unpickled.
"""
from __future__ import annotations

import hashlib
import io
import json
import pickle
import threading
import zipfile

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from . import captioner_report, evaluation, verdicts
from .models import Kind, ModelVersion
from .trainers import get_trainer
from .trainers.base import TrainingError

ARTIFACT_DIR = "modeling/versions"
_cache: dict[tuple[int, str], tuple] = {}
_cache_lock = threading.Lock()


# --- Safe loading ------------------------------------------------------------------------------------


def load_state_bytes(data: bytes, what: str):
    """``torch.load`` of bytes with ``weights_only=True``; any failure becomes a TrainingError naming ``what``."""
    import torch

    if not data:
        raise TrainingError(f"{what} is empty.", code="bad_checkpoint")
    if not data.startswith(b"PK\x03\x04"):
        raise TrainingError(f"{what} is corrupt or not a PyTorch weights file (torch.save writes a zip archive; "
                            f"this file starts with {data[:8]!r}).", code="bad_checkpoint")
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if "Unsupported global" in line]
        first = lines[0][:300] if lines else type(exc).__name__
        raise TrainingError(
            f"{what} was refused: it holds objects other than tensors and plain containers, and weights "
            f"are only ever loaded with weights_only=True ({first}).", code="unsafe_checkpoint") from None
    except (RuntimeError, EOFError, ValueError, zipfile.BadZipFile, OSError, KeyError) as exc:
        raise TrainingError(f"{what} is corrupt or not a PyTorch weights file "
                            f"({type(exc).__name__}: {str(exc)[:200]}).", code="bad_checkpoint") from None


def read_storage(name: str, what: str) -> bytes:
    try:
        with default_storage.open(name, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, OSError) as exc:
        raise TrainingError(f"{what} {name!r} is missing from storage ({exc}).", code="bad_checkpoint") from None


def load_state_dict_into(model, state, what: str):
    if not isinstance(state, dict):
        raise TrainingError(f"{what} does not hold a state dict.", code="bad_checkpoint")
    try:
        model.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError) as exc:
        raise TrainingError(f"{what} does not match the model: {str(exc)[:400]}", code="mismatched_checkpoint") from None


def save_storage(name: str, data: bytes) -> str:
    if default_storage.exists(name):
        default_storage.delete(name)
    return default_storage.save(name, ContentFile(data))


# --- Artifacts and versions --------------------------------------------------------------------------


def save_artifact(run, model, info: dict, config: dict, trainer_name: str) -> tuple[str, str]:
    """Write the final weights (a state dict on CPU) and a JSON sidecar; return (name, sha256). A model with
    an ``artifact_dtype`` (a torch float dtype, e.g. float16 for a fine-tuned transformer) has its floating
    tensors stored in it; loading copies them back into the model's own dtype."""
    import torch

    dtype = getattr(model, "artifact_dtype", None)

    def stored(v):
        v = v.detach().cpu()
        return v.to(dtype) if dtype is not None and v.is_floating_point() else v

    buffer = io.BytesIO()
    torch.save({k: stored(v) for k, v in model.state_dict().items()}, buffer)
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    base = f"{ARTIFACT_DIR}/{run.kind}/run-{run.pk}"
    name = save_storage(f"{base}.pt", data)
    sidecar = {"trainer": trainer_name, "config": config, "info": info, "sha256": sha, "run": run.pk}
    save_storage(f"{base}.json", json.dumps(sidecar, indent=2, default=str).encode())
    return name, sha


def register_version(run, artifact: str, sha: str, trainer_name: str, config: dict, info: dict,
                     metrics: dict) -> ModelVersion:
    """A new ModelVersion for the run, numbered max+1 within its kind (retried on a concurrent insert)."""
    existing = ModelVersion.objects.filter(run=run).first()
    if existing:
        return existing
    for _ in range(5):
        number = (ModelVersion.objects.filter(kind=run.kind).aggregate(m=Max("version"))["m"] or 0) + 1
        try:
            with transaction.atomic():
                note = evaluation.unusable_note(run.kind, metrics)
                return ModelVersion.objects.create(
                    kind=run.kind, version=number, run=run, artifact=artifact, artifact_sha256=sha,
                    config={"trainer": trainer_name, "config": config, "info": info}, metrics=metrics,
                    usable=not note, usable_note=note[:300])
        except IntegrityError:
            continue
    raise TrainingError("Could not number the new model version (too many concurrent registrations).")


def active_version(kind: str) -> ModelVersion | None:
    return ModelVersion.objects.filter(kind=kind, active=True).first()


def activate(version: ModelVersion, user=None, force: bool = False) -> ModelVersion:
    """Make ``version`` the one active version of its kind (atomically; the others are deactivated).

    Unless ``force``, ``check_activatable`` must pass: the version is usable, and its verdict
    (modeling.verdicts) satisfies the rule stated there (``verdicts.RULE``): at least ``MIN_ITEMS``
    evaluation items, the best baseline beaten by ``MARGIN`` macro F1, and a paired bootstrap interval
    of the difference above zero. A constant answer or a length rule in disguise must not end up
    filtering captions by accident."""
    if not force:
        check_activatable(version)
    with transaction.atomic():
        list(ModelVersion.objects.select_for_update().filter(kind=version.kind).values_list("pk", flat=True))
        ModelVersion.objects.filter(kind=version.kind, active=True).exclude(pk=version.pk).update(active=False)
        ModelVersion.objects.filter(pk=version.pk).update(active=True, activated_by=user, activated_at=timezone.now())
    version.refresh_from_db()
    return version


def check_activatable(version: ModelVersion) -> None:
    """Raise TrainingError when the version may not be activated without force: code "not_usable" (trained on
    too little to learn), or the code of the verdict's first reason (verdicts.CODES: "too_few_evaluation_items",
    "does_not_beat_majority", "does_not_beat_baselines", "interval_includes_zero", and "not_judged_by_rule"
    for an older majority-only verdict). Versions without a verdict (captioners, topic models) pass."""
    if not version.usable:
        why = version.usable_note or "trained on too little to learn"
        raise TrainingError(f"{version} is marked not usable ({why}). Activate it anyway only on purpose (force).",
                            code="not_usable")
    check_beats_retrieval(version)
    shown = verdicts.display(version.metrics)
    if shown is None or shown["activatable"] or shown["status"] == "none":
        return
    message, code = verdicts.refusal(version, shown)
    raise TrainingError(message, code=code)


def check_beats_retrieval(version: ModelVersion) -> None:
    """Raise TrainingError (code does_not_beat_retrieval) when a captioner's verdict says it does not beat
    nearest-neighbour caption retrieval on its own test split (captioner_judge); versions without that verdict
    (classifiers, captioners judged on a split too small for retrieval, older runs) pass."""
    if version.kind != Kind.CAPTIONER or not captioner_report.does_not_beat_retrieval(version.metrics):
        return
    text = version.metrics["retrieval_verdict"].get("text", "")
    raise TrainingError(f"{version} {captioner_report.BELOW_RETRIEVAL} ({text}). Activate it anyway only on "
                        "purpose (force).", code="does_not_beat_retrieval")


def deactivate(version: ModelVersion) -> ModelVersion:
    ModelVersion.objects.filter(pk=version.pk).update(active=False)
    version.refresh_from_db()
    return version


def load_version(version: ModelVersion | None = None, kind: str | None = None, device="cpu"):
    """Rebuild a registered model: ``(trainer, model, info)``, the model in eval mode on ``device``.

    With no version, the active one of ``kind``. The file's sha256 must match the registry; it is read
    with weights_only=True. Results are cached per process (version and checksum)."""
    import torch

    if version is None:
        if kind is None:
            raise TrainingError("load_version needs a version or a kind.", code="bad_config")
        version = active_version(kind)
        if version is None:
            raise TrainingError(f"No active {Kind(kind).label} version: activate one on the models page.",
                                code="no_active_version")
    key = (version.pk, version.artifact_sha256, str(device))
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    stored = version.config or {}
    trainer = get_trainer(stored.get("trainer", ""))
    config = trainer.config(stored.get("config") or {})
    info = stored.get("info") or {}
    what = f"The weights of {version}"
    data = read_storage(version.artifact, what)
    if hashlib.sha256(data).hexdigest() != version.artifact_sha256:
        raise TrainingError(f"{what} changed since registration (sha256 mismatch).", code="bad_checkpoint")
    state = load_state_bytes(data, what)
    model = trainer.build(config, info)
    load_state_dict_into(model, state, what)
    model.to(torch.device(device)).eval()
    result = (trainer, model, info)
    with _cache_lock:
        _cache[key] = result
    return result


def clear_cache():
    with _cache_lock:
        _cache.clear()
