"""A frozen Release -> tensors for the captioners.

Images are read through ``default_storage.open(item.image_file)``, converted to RGB, resized to a
small square (64 px by default, enough for CPU runs) and cached per run by their sha256, so an image
with five captions is decoded once. A release whose images are missing from storage is refused with
the list of missing files, unless the run's config says ``"missing_images": "skip"``.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass, field

import numpy as np
import torch
from django.core.files.storage import default_storage
from PIL import Image as PILImage

from modeling.captioning.provenance import filter_version_of
from modeling.trainers.base import TrainingError

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")


@dataclass
class ReleaseRows:
    """The release's items, grouped per split: [{item, image_key, text, fluency, fluency_version, image_id,
    caption_id}] (``fluency_version``: the pk of the fluency version that scored it, where the release names it)."""

    rows: dict = field(default_factory=dict)
    images: dict = field(default_factory=dict)  # sha256 -> uint8 tensor [3, S, S]
    missing: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def load_image(name: str, size: int) -> torch.Tensor:
    with default_storage.open(name, "rb") as fh:
        data = fh.read()
    with PILImage.open(io.BytesIO(data)) as img:
        img = img.convert("RGB").resize((size, size), PILImage.BILINEAR)
        array = np.asarray(img, dtype=np.uint8).copy()
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


def _fluency_from_provenance(provenance: dict):
    for entry in (provenance or {}).get("decisions", ()):
        if entry.get("filter") == "fluency" and entry.get("score") is not None:
            return float(entry["score"])
    return None


def _model_generated(provenance: dict) -> bool:
    """Whether a captioner wrote the caption, or the caption it was transformed from (its lineage)."""
    provenance = provenance or {}
    return provenance.get("origin") == "model" or any(node.get("origin") == "model"
                                                      for node in provenance.get("lineage") or ())


def raw_source(provenance: dict, text: str) -> str | None:
    """The raw text the released caption was transformed from (its lineage's last node: an alt text, a
    translation's source), or None when there is none or it is the released text itself."""
    lineage = (provenance or {}).get("lineage") or ()
    raw = (lineage[-1].get("text") if lineage and isinstance(lineage[-1], dict) else None) or ""
    return raw if raw.strip() and raw.strip() != (text or "").strip() else None


def release_rows(release, config: dict, cache: dict | None = None, decode: bool = True) -> ReleaseRows:
    """Read the release's items and their images (see the module docstring). With ``decode=False`` no image is
    read or checked: a pretrained encoder's runs read features from a cache, or images through its processor."""
    from releases.models import Release, ReleaseItem

    if release is None:
        raise TrainingError("A captioner is trained on a frozen release; choose one.", code="bad_config")
    if release.status != Release.Status.FROZEN:
        raise TrainingError(f"Release {release.name!r} is {release.get_status_display().lower()}, not frozen; "
                            "only a frozen release can be trained on.", code="bad_config")
    size = int(config.get("image_size", 64))
    skip = config.get("missing_images", "fail") == "skip"
    cache = {} if cache is None else cache
    out = ReleaseRows(rows={s: [] for s in SPLITS}, images=cache)
    items = ReleaseItem.objects.filter(release=release).order_by("position").values(
        "position", "split", "image_id", "image_sha256", "image_file", "caption_id", "text", "provenance",
        "human_verified")
    missing: dict[str, str] = {}
    for item in items:
        key = item["image_sha256"] or item["image_file"]
        if decode and key not in cache and key not in missing:
            name = item["image_file"]
            try:
                if not name or not default_storage.exists(name):
                    raise FileNotFoundError(name)
                cache[key] = load_image(name, size)
            except FileNotFoundError:
                missing[key] = name or f"(item {item['position']} has no image file)"
            except Exception as exc:  # unreadable bytes count as missing, with the reason  # noqa: BLE001
                missing[key] = f"{name} ({type(exc).__name__}: {exc})"
        if key in missing:
            continue
        out.rows[item["split"]].append({
            "position": item["position"], "image_key": key, "image_id": item["image_id"],
            "image_file": item["image_file"], "human_verified": item["human_verified"],
            "model_generated": _model_generated(item["provenance"]),
            "caption_id": item["caption_id"], "text": item["text"],
            "source": raw_source(item["provenance"], item["text"]),
            "fluency": _fluency_from_provenance(item["provenance"]),
            "fluency_version": filter_version_of(item["provenance"])})
    out.missing = sorted(missing.values())
    if out.missing:
        listed = ", ".join(out.missing[:10]) + (f" and {len(out.missing) - 10} more" if len(out.missing) > 10 else "")
        if not skip:
            raise TrainingError(f"{len(out.missing)} image(s) of release {release.name!r} are missing in storage: "
                                f"{listed}. Restore them, or set \"missing_images\": \"skip\" to train without "
                                "them.", code="missing_images")
        out.notes.append(f"skipped {len(out.missing)} missing image(s): {listed}")
    return out


def images_tensor(keys: list[str], cache: dict) -> tuple[torch.Tensor, dict]:
    """Stack the distinct images once: (uint8 [N, 3, S, S], key -> row)."""
    order = list(dict.fromkeys(keys))
    index = {k: i for i, k in enumerate(order)}
    if not order:
        return torch.zeros(0, 3, 1, 1, dtype=torch.uint8), index
    return torch.stack([cache[k] for k in order]), index


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 [.., 3, S, S] -> float in [-1, 1]."""
    return images.float().div_(127.5).sub_(1.0)


def data_hash(release, rows: ReleaseRows, extra: dict) -> str:
    digest = hashlib.sha256()
    digest.update((release.content_hash or "").encode())
    for split in SPLITS:
        for r in rows.rows[split]:
            digest.update(json.dumps([split, r["image_key"], r["text"], r["fluency"]]).encode())
    digest.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return digest.hexdigest()
