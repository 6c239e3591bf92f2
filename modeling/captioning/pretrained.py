"""A registered pack model as a captioner's image encoder: ``(pooled [B, Dp], grid [B, N, Dg])``.

What each architecture gives:
- ViT / DeiT / DINOv2: the (layer-normed) CLS token and the patch tokens;
- CLIP (the whole image-text model, or a CLIP vision tower): the projected image embedding, the one CLIP scores
  with, and the patch tokens of the vision tower;
- SigLIP: the attention-pooled embedding and every patch token (SigLIP has no CLS token);
- ResNet / ConvNeXt: the pooled output and the last feature map, flattened to regions.

Weights come through ``pack.load`` (sha256 of every file, offline, safetensors only, cached per process);
images go through the model's own image processor (PIL backend), resized when the run asks for another size.
``preprocessing`` hashes everything that changes the features, so a feature cache built with another
preprocessing is never read as this one's.
"""
from __future__ import annotations

import copy
import hashlib
import json

import torch
from torch import nn

from modeling.trainers.base import TrainingError

# Bump when the way features are read out of a model changes: caches made the old way are then rebuilt.
FEATURE_LAYOUT = "pooled+grid/1"

FAMILIES = {"vit": "vit", "deit": "vit", "dinov2": "vit", "resnet": "conv", "convnext": "conv",
            "convnextv2": "conv", "clip": "clip", "clip_vision_model": "clip", "siglip": "siglip",
            "siglip2": "siglip", "siglip_vision_model": "siglip"}
# Transformers whose position embeddings must be interpolated when the image size is not the trained one.
INTERPOLATES = ("vit", "deit", "clip", "clip_vision_model", "siglip", "siglip_vision_model")


def model_row(name: str):
    """The registered image encoder called ``name``; TrainingError when there is none or it is a text model."""
    from pack.models import PretrainedModel

    found = PretrainedModel.objects.filter(name=(name or "").strip()).first()
    if found is None:
        raise TrainingError(f"No model named {name!r} is registered in the model pack: register the directory "
                            "(`manage.py models add-pretrained`) or leave \"encoder\" empty for the small CNN.",
                            code="bad_config")
    if found.kind == PretrainedModel.Kind.TEXT:
        raise TrainingError(f"{found.key} is a sentence encoder: a captioner needs an image encoder (a vision "
                            "model or a CLIP-family model).", code="bad_config")
    return found


def load_pack(row, device: str = "cpu"):
    """The pack's loaded model (verified, cached); PackError becomes a TrainingError the run shows."""
    import pack

    try:
        return pack.load(row, device=device)
    except pack.PackError as exc:
        raise TrainingError(f"The encoder {row.key} cannot be loaded: {exc.message}", code="bad_weights") from None


def model_type(net) -> str:
    return getattr(net.config, "model_type", "")


class PretrainedEncoder(nn.Module):
    """The readout described in the module docstring; ``blocks()`` lists the blocks in depth order, for
    fine-tuning the last ones."""

    def __init__(self, net, interpolate: bool = False):
        super().__init__()
        kind = model_type(net)
        if kind not in FAMILIES:
            raise TrainingError(f"A {type(net).__name__} ({kind!r}) is not an image encoder the captioners read; "
                                f"use one of {', '.join(sorted(FAMILIES))}.", code="bad_config")
        self.family = FAMILIES[kind]
        self.body = net.vision_model if hasattr(net, "vision_model") else net
        self.projection = getattr(net, "visual_projection", None)
        self.kwargs = {"interpolate_pos_encoding": True} if interpolate and kind in INTERPOLATES else {}

    def forward(self, pixel_values):
        out = self.body(pixel_values=pixel_values, **self.kwargs)
        hidden = out.last_hidden_state
        pooled = getattr(out, "pooler_output", None)
        if self.family == "conv":  # hidden [B, C, h, w]
            grid = hidden.flatten(2).transpose(1, 2)
            pooled = grid.mean(dim=1) if pooled is None else pooled.flatten(1)
        elif self.family == "vit":  # hidden [B, 1 + N, D]
            pooled, grid = hidden[:, 0], hidden[:, 1:]
        elif self.family == "clip":
            pooled = hidden[:, 0] if pooled is None else pooled
            pooled = self.projection(pooled) if self.projection is not None else pooled
            grid = hidden[:, 1:]
        else:  # siglip: no CLS token, the head pools every patch
            pooled, grid = (hidden.mean(dim=1) if pooled is None else pooled), hidden
        return pooled, grid

    def blocks(self) -> list[nn.Module]:
        # Where the blocks sit moved between transformers versions (model.encoder.layer, model.layers): look in both.
        for holder in (getattr(self.body, "encoder", None), self.body):
            if holder is None:
                continue
            if self.family == "conv" and isinstance(getattr(holder, "stages", None), nn.ModuleList):
                return [layer for stage in holder.stages for layer in getattr(stage, "layers", [stage])]
            for name in ("layer", "layers", "blocks"):
                found = getattr(holder, name, None)
                if isinstance(found, nn.ModuleList) and len(found):
                    return list(found)
        return []

    def tail(self) -> list[nn.Module]:
        """What follows the blocks (final norms, pooling head, projection): trained with the last blocks."""
        names = ("layernorm", "post_layernorm", "pooler", "head", "norm")
        found = [getattr(self.body, n) for n in names if isinstance(getattr(self.body, n, None), nn.Module)]
        return found + ([self.projection] if self.projection is not None else [])


def unfreeze_last(encoder: PretrainedEncoder, blocks: int) -> int:
    """Freeze the encoder but its last ``blocks`` blocks (and the tail after them); return how many trainable."""
    available = encoder.blocks()
    if blocks > len(available):
        raise TrainingError(f"finetune_blocks is {blocks} but this encoder has {len(available)} blocks.",
                            code="bad_config")
    for p in encoder.parameters():
        p.requires_grad_(False)
    for module in (available[len(available) - blocks:] if blocks else []) + (encoder.tail() if blocks else []):
        for p in module.parameters():
            p.requires_grad_(True)
    return blocks


class FrozenEncoder(nn.Module):
    """A frozen pack encoder held outside the captioner's state dict: its weights come from the pack (hash-checked),
    not from the run's artifact, and it is loaded only when images are encoded (generation), never while a decoder
    trains from cached features."""

    def __init__(self, row, interpolate: bool):
        super().__init__()
        self.row, self.interpolate = row, interpolate
        self.__dict__["inner"] = None  # not a submodule: no parameters, no state-dict entries

    def forward(self, pixel_values):
        if self.__dict__["inner"] is None or next(self.inner.parameters()).device != pixel_values.device:
            loaded = load_pack(self.row, device=pixel_values.device.type)
            self.__dict__["inner"] = PretrainedEncoder(loaded.model, self.interpolate).eval()
        with torch.no_grad():
            pooled, grid = self.inner(pixel_values)
        return pooled.float(), grid.float()


def trainable_encoder(row, interpolate: bool, blocks: int) -> PretrainedEncoder:
    """A private copy of the pack model (the cached one stays frozen for other jobs), last ``blocks`` trainable."""
    loaded = load_pack(row, device="cpu")
    encoder = PretrainedEncoder(copy.deepcopy(loaded.model), interpolate).train()
    unfreeze_last(encoder, blocks)
    return encoder


# --- preprocessing ---------------------------------------------------------------------------------------------


def processor_for(row, image_size: int = 0):
    """The model's own image processor, resized to ``image_size`` (0: as registered)."""
    processor = load_pack(row, device="cpu").processor
    if not image_size:
        return processor
    settings = processor.to_dict()
    size = settings.get("size") or {}
    settings["size"] = {"shortest_edge": image_size} if "shortest_edge" in size else {"height": image_size,
                                                                                     "width": image_size}
    if settings.get("crop_size"):
        settings["crop_size"] = {"height": image_size, "width": image_size}
    return type(processor).from_dict(settings)


def preprocessing(row, processor, image_size: int) -> tuple[dict, str]:
    """(what the hash covers, its sha256): the processor's settings, the size asked for, the feature layout."""
    settings = {"processor": json.loads(json.dumps(processor.to_dict(), sort_keys=True, default=str)),
                "image_size": int(image_size), "layout": FEATURE_LAYOUT, "model": row.key}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()
    return settings, digest


def pixels(processor, images: list) -> torch.Tensor:
    """Float pixel values [B, 3, H, W] of decoded PIL images."""
    return processor(images=[im.convert("RGB") for im in images], return_tensors="pt")["pixel_values"]


def probe(row, processor, interpolate: bool) -> dict:
    """The shapes the encoder gives at this preprocessing: pooled_dim, regions, grid_dim, pixel size."""
    from PIL import Image

    loaded = load_pack(row, device="cpu")
    sample = pixels(processor, [Image.new("RGB", (64, 48), (128, 128, 128))])
    try:
        with torch.no_grad():
            pooled, grid = PretrainedEncoder(loaded.model, interpolate)(sample)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise TrainingError(f"The encoder {row.key} cannot encode images at {tuple(sample.shape[-2:])}: "
                            f"{str(exc)[:200]}", code="bad_config") from None
    return {"pooled_dim": int(pooled.shape[-1]), "regions": int(grid.shape[1]), "grid_dim": int(grid.shape[-1]),
            "pixels": int(sample.shape[-1]), "model_type": model_type(loaded.model)}


def reduce_grid(grid: torch.Tensor, side: int) -> torch.Tensor:
    """The grid average-pooled to at most side x side regions (0: unchanged). A grid that is not square is kept."""
    n = grid.shape[1]
    root = int(round(n ** 0.5))
    if not side or root * root != n or root <= side:
        return grid
    maps = grid.transpose(1, 2).reshape(grid.shape[0], grid.shape[2], root, root)
    pooled = nn.functional.adaptive_avg_pool2d(maps.float(), side).to(grid.dtype)
    return pooled.flatten(2).transpose(1, 2)
