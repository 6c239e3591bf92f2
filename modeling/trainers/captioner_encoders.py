"""Which image encoder a captioner run uses, and the image side of its data.

``encoder`` "" is the small CNN trained from scratch (``encoder_weights`` / ``encoder_version`` may initialise it);
a registered pack model's name is a pretrained encoder, ``encoder_mode`` "frozen" (the decoder learns from the
feature cache) or "finetune" (end to end, the last ``finetune_blocks`` blocks trained at ``encoder_lr_scale`` x
lr). The spec recorded in the version's info (name, key, preprocessing, shapes) is what rebuilds the encoder for
generation, from the pack again.
"""
from __future__ import annotations

import torch

from modeling.captioning import features, pretrained

from . import captioner_data as cd
from .base import TrainingError

MODES = ("frozen", "finetune")


def check_config(config: dict, decoder: str) -> None:
    if not config.get("encoder"):
        return
    if config.get("encoder_mode", "frozen") not in MODES:
        raise TrainingError(f"encoder_mode {config.get('encoder_mode')!r}: use \"frozen\" or \"finetune\".",
                            code="bad_config")
    if config.get("encoder_weights") or config.get("encoder_version"):
        raise TrainingError("encoder_weights and encoder_version initialise the small CNN; a pretrained encoder "
                            f"({config['encoder']!r}) brings its own weights. Set one or the other.", code="bad_config")
    try:
        ok = int(config.get("feature_grid") or 0) >= 0 and int(config.get("finetune_blocks") or 0) >= 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TrainingError("feature_grid and finetune_blocks are whole numbers, 0 or more.", code="bad_config")


def spec(config: dict, decoder: str) -> tuple:
    """(the pack row, its processor, the encoder's spec for the version's info, preprocessing settings)."""
    row = pretrained.model_row(config["encoder"])
    size = int(config.get("encoder_image_size") or 0)
    processor = pretrained.processor_for(row, size)
    shapes = pretrained.probe(row, processor, bool(size))
    if decoder == "transformer" and shapes["regions"] < 1:
        raise TrainingError(f"The Transformer decoder attends over a grid of region features, and {row.key} "
                            f"({row.architecture}) gives none: use captioner-lstm, which reads the pooled "
                            "feature.", code="bad_config")
    settings, digest = pretrained.preprocessing(row, processor, size)
    mode = config.get("encoder_mode", "frozen")
    out = {"name": row.name, "key": row.key, "architecture": row.architecture, "licence": row.licence,
           "mode": mode, "preprocessing": digest, "image_size": size, "grid_side": int(config.get("feature_grid") or 0),
           "finetune_blocks": int(config.get("finetune_blocks") or 0) if mode == "finetune" else 0, **shapes}
    if mode == "finetune":  # refuse a block count the model does not have before reading any image
        blocks = len(pretrained.PretrainedEncoder(pretrained.load_pack(row).model, bool(size)).blocks())
        if out["finetune_blocks"] > blocks:
            raise TrainingError(f"finetune_blocks is {out['finetune_blocks']} but {row.key} has {blocks} blocks.",
                                code="bad_config")
    return row, processor, out, settings


def frozen_side(release, rows: dict, row, encoder: dict, settings: dict, config: dict, device: str, notes: list):
    """The rows whose images the feature cache holds, (key -> row, pooled, grid) from that cache (built here when
    it does not exist yet) and the images it lacks."""
    cache = features.cache_for(release, row, settings, encoder["preprocessing"])
    made = cache.status != cache.Status.DONE
    cache = features.cache_ensure(cache, batch_size=int(config.get("cache_batch_size") or 64),
                                  workers=int(config.get("loader_workers", -1)), log=notes.append)
    notes.append(f"features from cache #{cache.pk} ({'computed now' if made else 'reused'}: {len(cache.shards)} "
                 f"shard(s), {cache.images - len(cache.missing)} image(s))")
    index, pooled, grid = features.cache_read(cache, pin=device == "cuda")
    encoder["feature_cache"] = cache.pk
    rows = cd.apply_missing(rows, list(cache.missing or []), index, config, release, notes)
    if encoder["grid_side"]:
        grid = pretrained.reduce_grid(grid, encoder["grid_side"])
        encoder["regions"] = int(grid.shape[1])
    return rows, (index, pooled, grid), list(cache.missing or [])


def attach_features(split: dict, order: list[str], cached, decoder: str) -> None:
    index, pooled, grid = cached
    rows = torch.tensor([index[key] for key in order], dtype=torch.long)
    split["pooled"] = pooled[rows]
    # The LSTM reads the pooled vector only: no grid is kept in memory for it.
    split["grid"] = grid[rows] if decoder == "transformer" else grid[rows][:, :0]


def build_encoder(info: dict):
    """The encoder module of a version's captioner: None for the small CNN (the Captioner makes it)."""
    encoder = info.get("encoder")
    if not encoder:
        return None
    row = pretrained.model_row(encoder["name"])
    if row.key != encoder["key"]:
        raise TrainingError(f"The encoder {encoder['name']!r} was registered again with other weights ({row.key}, "
                            f"not {encoder['key']}): this captioner was trained on the old ones.",
                            code="bad_weights")
    interpolate = bool(encoder.get("image_size"))
    if encoder.get("mode") == "finetune":
        return pretrained.trainable_encoder(row, interpolate, int(encoder.get("finetune_blocks") or 0))
    return pretrained.FrozenEncoder(row, interpolate)


def encoder_parameters(model) -> tuple[list, list]:
    """(the trainable encoder parameters, the rest): the two optimizer groups of fine-tuning."""
    encoder = [p for p in model.encoder.parameters() if p.requires_grad]
    ids = {id(p) for p in encoder}
    return encoder, [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
