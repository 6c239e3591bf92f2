"""What a model directory is, read from its files alone (no weights loaded): architecture, kind, the sha256 of
every file, the parameter count (from the safetensors headers) and the embedding size (from the config).

A directory is refused with a clear reason when it is missing, holds pickled weights, has no safetensors
weights, has a truncated safetensors file (a half-finished copy) or an architecture the pack cannot load.
"""
from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

from .errors import PackError

PICKLED = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
# config.json "model_type" -> the pack's kind. CLIP-family models expose get_image_features/get_text_features.
CLIP_TYPES = {"clip": "CLIPModel", "siglip": "SiglipModel", "siglip2": "Siglip2Model"}
# Image encoders a captioner can start from (modeling.captioning.pretrained knows how to read each one's outputs).
VISION_TYPES = {"vit": "ViTModel", "deit": "DeiTModel", "dinov2": "Dinov2Model", "resnet": "ResNetModel",
                "convnext": "ConvNextModel", "convnextv2": "ConvNextV2Model", "clip_vision_model": "CLIPVisionModel",
                "siglip_vision_model": "SiglipVisionModel"}
SENTENCE_MARKER = "modules.json"  # sentence-transformers directories list their modules here


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest(directory: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under the directory (hidden files and caches left out)."""
    directory = Path(directory)
    return {str(p.relative_to(directory)): file_sha256(p) for p in sorted(directory.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(directory).parts)}


def weights_digest(files: dict[str, str]) -> str:
    """One sha256 over the weights files' hashes: the model version a key and every decision records."""
    weights = sorted(sha for name, sha in files.items() if name.endswith(".safetensors"))
    return hashlib.sha256("".join(weights).encode()).hexdigest()  # as modeling.encoders.cache_key


def safetensors_parameters(path: Path) -> int:
    """The number of parameters a safetensors file holds, from its header; PackError when the file is cut short."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) < 8:
            raise PackError(f"{path.name} is truncated (a half-finished copy?).", code="incomplete")
        (length,) = struct.unpack("<Q", raw)
        if length > size - 8 or length > 100_000_000:
            raise PackError(f"{path.name} is truncated or not a safetensors file.", code="incomplete")
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            raise PackError(f"{path.name} has an unreadable safetensors header.", code="incomplete") from None
    total, end = 0, 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for dim in entry.get("shape", []):
            count *= int(dim)
        total += count
        end = max(end, int(entry.get("data_offsets", [0, 0])[1]))
    if 8 + length + end > size:
        raise PackError(f"{path.name} is shorter than its header says: the copy is incomplete.", code="incomplete")
    return total


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackError(f"{path.name} cannot be read: {exc}", code="incomplete") from None


def check_no_pickles(directory: Path) -> None:
    pickled = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.suffix in PICKLED)
    if pickled:
        raise PackError(f"{directory} holds pickled weights ({', '.join(pickled)}): only safetensors are "
                        f"loaded. Convert them (e.g. save_pretrained(..., safe_serialization=True)) and remove "
                        f"the pickles.", code="unsafe_weights")


def inspect_directory(directory: Path) -> dict:
    """{kind, architecture, files, weights_sha256, parameters, embedding_dim} of a model directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise PackError(f"No model directory at {directory}.", code="missing", field="directory")
    check_no_pickles(directory)
    weights = sorted(directory.rglob("*.safetensors"))
    if not weights:
        raise PackError(f"{directory} has no *.safetensors weights (missing, or a half-finished copy).",
                        code="incomplete", field="directory")
    parameters = sum(safetensors_parameters(p) for p in weights)
    if (directory / SENTENCE_MARKER).is_file():
        kind, architecture, dim = "text", "SentenceTransformer", _sentence_dim(directory)
    else:
        if not (directory / "config.json").is_file():
            raise PackError(f"{directory} has no config.json: not a Hugging Face model directory.",
                            code="incomplete", field="directory")
        config = _read_json(directory / "config.json")
        kind, architecture, dim = _hf_facts(directory, config)
    files = manifest(directory)
    return {"kind": kind, "architecture": architecture, "files": files, "weights_sha256": weights_digest(files),
            "parameters": parameters, "embedding_dim": dim}


def _hf_facts(directory: Path, config: dict) -> tuple[str, str, int]:
    """(kind, architecture, embedding size) of a Hugging Face model directory's config, or PackError."""
    model_type = config.get("model_type", "")
    if model_type in CLIP_TYPES:
        _require_processor(directory)
        dim = int(config.get("projection_dim") or config.get("text_config", {}).get("hidden_size") or 0)
        return "clip", (config.get("architectures") or [CLIP_TYPES[model_type]])[0], dim
    if model_type in VISION_TYPES:
        _require_processor(directory, tokenizer=False)
        sizes = config.get("hidden_sizes") or [config.get("projection_dim") or config.get("hidden_size") or 0]
        return "vision", (config.get("architectures") or [VISION_TYPES[model_type]])[0], int(sizes[-1] or 0)
    raise PackError(f"{directory}: architecture {model_type or 'unknown'!r} is not one the pack loads "
                    f"(CLIP-family: {', '.join(sorted(CLIP_TYPES))}; image encoders: "
                    f"{', '.join(sorted(VISION_TYPES))}; or a sentence-transformers directory with modules.json).",
                    code="unknown_architecture", field="directory")


def _require_processor(directory: Path, tokenizer: bool = True) -> None:
    if not any((directory / name).is_file() for name in ("preprocessor_config.json", "processor_config.json")):
        raise PackError(f"{directory} has no preprocessor_config.json or processor_config.json: copy the image "
                        f"processor's files with the weights.", code="incomplete", field="directory")
    tokenizer_files = ("tokenizer.json", "vocab.json", "spiece.model", "tokenizer.model")
    if tokenizer and not any((directory / name).is_file() for name in tokenizer_files):
        raise PackError(f"{directory} has no tokenizer files: copy them with the weights.", code="incomplete",
                        field="directory")


def _sentence_dim(directory: Path) -> int:
    pooling = directory / "1_Pooling" / "config.json"
    if pooling.is_file():
        return int(_read_json(pooling).get("word_embedding_dimension") or 0)
    config = directory / "config.json"
    return int(_read_json(config).get("hidden_size") or 0) if config.is_file() else 0
