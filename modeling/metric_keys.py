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


# The range each bounded metric can take: an interval drawn around a mean is cut to it (a t-interval over three
# seeds can run past either end). CIDEr-D is at most 10 (its scale factor); CLIP-S and RefCLIP-S at most w = 2.5
# (Hessel et al. 2021).
UNIT = (0.0, 1.0)
METRIC_RANGES = {"BLEU-1": UNIT, "BLEU-2": UNIT, "BLEU-3": UNIT, "BLEU-4": UNIT, "METEOR": UNIT, "ROUGE-L": UNIT,
                 "CIDEr": (0.0, 10.0), "CLIP-S": (0.0, 2.5), "RefCLIP-S": (0.0, 2.5), "references_CLIP-S": (0.0, 2.5),
                 "unique_captions": UNIT, "precision": UNIT, "recall": UNIT, "f1": UNIT, "f1_negative": UNIT,
                 "macro_f1": UNIT, "accuracy": UNIT, "ece": UNIT, "brier": UNIT}


def metric_range(key: str) -> tuple[float, float] | None:
    """(low, high) a metric can take, by its last name ("caption_baselines.retrieval.CIDEr" -> CIDEr's); None when
    unbounded or unknown. distinct_n shares are in [0, 1]."""
    name = key.rsplit(".", 1)[-1]
    if name.startswith("distinct_"):
        return UNIT
    return METRIC_RANGES.get(name)


def clip_to_range(key: str, low, high, *, difference: bool = False):
    """(low, high) cut to the metric's range; a difference of two values is cut to [-(hi - lo), hi - lo]."""
    bounds = metric_range(key)
    if bounds is None or low is None or high is None:
        return low, high
    lo, hi = bounds
    if difference:
        lo, hi = -(hi - lo), hi - lo
    return max(lo, min(hi, low)), max(lo, min(hi, high))
