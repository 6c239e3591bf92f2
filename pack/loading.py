"""Loading a registered model, verified and offline, once per process, and encoding with it.

``load(model)`` checks every file's sha256 (catalogue.verify), forces the Hugging Face libraries offline,
loads safetensors only (``use_safetensors=True``; pickles were refused before) with ``local_files_only``, and
uses the PIL image processor (PyPI's torchvision does not import beside this torch). The result is cached per
process, keyed by the model's key, so a worker verifies and loads a model once.

``Encoder.encode_images`` / ``encode_texts`` return L2-normalised float32 arrays [n, dim], in batches, under
``torch.inference_mode``, with autocast (bf16, else fp16) on CUDA.
"""
from __future__ import annotations

import contextlib
import os
import threading

import numpy as np

from .catalogue import verify
from .errors import PackError

_loaded: dict[str, Encoder] = {}
_lock = threading.Lock()


def _offline() -> None:
    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[variable] = "1"


def pick_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _normalise(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.maximum(norms, 1e-12)


def _features(output):
    """get_*_features returns a tensor in older transformers and an output object (projected vectors in
    ``pooler_output``) in 5.x."""
    return output if hasattr(output, "float") else output.pooler_output


class Encoder:
    """A loaded model. ``key`` is the registry key (``name@sha12``) that stored vectors are filed under."""

    def __init__(self, model, key: str, dim: int, kind: str, device: str):
        self.model, self.key, self.dim, self.kind, self.device = model, key, dim, kind, device
        self.tokenizer = self.processor = None
        self.logit_scale = 1.0
        self.logit_bias = 0.0

    def _autocast(self):
        import torch

        if self.device != "cuda":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.autocast("cuda", dtype=dtype)

    def encode_texts(self, texts: list[str], batch_size: int = 128) -> np.ndarray:
        texts = [t or "" for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.kind == "text":
            vectors = self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                        show_progress_bar=False, normalize_embeddings=True)
            return _normalise(vectors)
        import torch

        out = []
        max_length = getattr(self.tokenizer, "model_max_length", 77)
        max_length = max_length if isinstance(max_length, int) and 0 < max_length < 100_000 else 77
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer(texts[start:start + batch_size], padding="max_length" if self.pad_to_max
                                   else True, truncation=True, max_length=max_length, return_tensors="pt")
            batch = {k: v.to(self.device) for k, v in batch.items()}
            with torch.inference_mode(), self._autocast():
                out.append(_features(self.model.get_text_features(**batch)).float().cpu().numpy())
        return _normalise(np.concatenate(out))

    pad_to_max = False

    def pixels(self, images: list) -> "object":
        """The processor's pixel tensor of decoded PIL images (RGB): the part a CPU data loader may do."""
        return self.processor(images=[im.convert("RGB") for im in images], return_tensors="pt")["pixel_values"]

    def encode_pixels(self, pixel_values) -> np.ndarray:
        import torch

        with torch.inference_mode(), self._autocast():
            features = self.model.get_image_features(pixel_values=pixel_values.to(self.device, non_blocking=True))
            return _normalise(_features(features).float().cpu().numpy())

    def encode_images(self, images: list, batch_size: int = 64) -> np.ndarray:
        if self.kind != "clip":
            what = "an image encoder without a text tower" if self.kind == "vision" else "a text encoder"
            raise PackError(f"{self.key} is {what}: it does not embed images for search.", code="wrong_kind")
        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([self.encode_pixels(self.pixels(images[s:s + batch_size]))
                               for s in range(0, len(images), batch_size)])

    def similarity(self, image_vectors: np.ndarray, text_vectors: np.ndarray) -> np.ndarray:
        """Cosine similarity of matching rows (the CLIP score before its logit scale)."""
        return np.sum(image_vectors * text_vectors, axis=1)


def load(model, device: str | None = None) -> Encoder:
    """The verified, loaded model (cached per process and device)."""
    device = device or pick_device()
    cache = f"{model.key}|{device}"
    with _lock:
        if cache in _loaded:
            return _loaded[cache]
    directory = verify(model)
    _offline()
    try:
        loader = {"text": _load_text, "vision": _load_vision}.get(model.kind, _load_clip)
        encoder = loader(model, directory, device)
    except PackError:
        raise
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise PackError(f"The model {model.name!r} could not be loaded from {directory}: {str(exc)[:300]}",
                        code="broken") from None
    with _lock:
        _loaded[cache] = encoder
    return encoder


def _load_clip(model, directory, device: str) -> Encoder:
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    net = AutoModel.from_pretrained(str(directory), local_files_only=True, use_safetensors=True)
    if not (hasattr(net, "get_image_features") and hasattr(net, "get_text_features")):
        raise PackError(f"The model {model.name!r} ({type(net).__name__}) has no image and text towers.",
                        code="unknown_architecture")
    net.eval().to(device)
    processor = AutoImageProcessor.from_pretrained(str(directory), local_files_only=True, backend="pil")
    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    dim = int(getattr(net.config, "projection_dim", 0) or model.embedding_dim)
    encoder = Encoder(net, model.key, dim, "clip", device)
    encoder.processor, encoder.tokenizer = processor, tokenizer
    encoder.pad_to_max = "siglip" in getattr(net.config, "model_type", "")  # SigLIP was trained on padded text
    scale = getattr(net, "logit_scale", None)
    encoder.logit_scale = float(scale.exp().item()) if scale is not None else 100.0
    bias = getattr(net, "logit_bias", None)
    encoder.logit_bias = float(bias.item()) if bias is not None else 0.0
    return encoder


def _load_vision(model, directory, device: str) -> Encoder:
    """An image encoder (ViT, ResNet, ConvNeXt ...): the captioners read its outputs
    (modeling.captioning.pretrained); it has no text tower, so it does not embed for search."""
    from transformers import AutoImageProcessor, AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    net = AutoModel.from_pretrained(str(directory), local_files_only=True, use_safetensors=True)
    net.eval().to(device)
    encoder = Encoder(net, model.key, int(model.embedding_dim), "vision", device)
    encoder.processor = AutoImageProcessor.from_pretrained(str(directory), local_files_only=True, backend="pil")
    return encoder


def _load_text(model, directory, device: str) -> Encoder:
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    net = SentenceTransformer(str(directory), device=device, local_files_only=True)
    net.eval()
    return Encoder(net, model.key, int(model.embedding_dim or net.get_sentence_embedding_dimension()), "text", device)


def clear_cache() -> None:
    with _lock:
        _loaded.clear()
