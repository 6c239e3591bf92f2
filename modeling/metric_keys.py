"""Metric names as the pages and the group statistics read them: a run's nested metrics flattened to
"a.b" keys, and the order in which they are listed (caption metrics first, then the classifier's)."""
from __future__ import annotations

import re

CAPTION_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "CLIP-S", "RefCLIP-S")
CLASSIFIER_METRICS = ("precision", "recall", "f1", "accuracy")


def natural_key(name: str) -> list:
    """"diversity.position_10" after "diversity.position_9": digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def flatten_metrics(metrics: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}; only numbers (and lists are left out; "extras" too)."""
    flat = {}
    for key, value in (metrics or {}).items():
        if key == "extras" and not prefix:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_metrics(value, name + "."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[name] = value
    return flat


def ordered_keys(flats: list[dict]) -> list[str]:
    """Every key of the flat metrics, top-level first, the caption and classifier metrics in their order."""
    keys = []
    for flat in flats:
        keys.extend(k for k in flat if k not in keys)
    priority = {name: i for i, name in enumerate(CAPTION_METRICS + CLASSIFIER_METRICS)}
    return sorted(keys, key=lambda k: (k.count("."), priority.get(k, 100), natural_key(k)))
