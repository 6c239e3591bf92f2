"""Run groups: one config trained with several seeds, summarised as mean ± sd, and two groups compared
with a test instead of by their highest single number.

Seed-to-seed swings of a captioner are as large as the differences between strategies (issue 22: LSTM
CIDEr 1.035 vs 0.674 on seeds 1 and 2 of one config), so a page that bolds the higher of two runs
reports noise. Here a difference is only called one when the 95% interval of the difference between
the groups excludes zero: paired by seed index when both groups ran the same seeds (the same split and
initialisation draw on both sides), else Welch's t-test on the two groups' values. A captioner's CIDEr, where
every run stored its per-image scores, is compared by a bootstrap over both the seeds and the test images (paired
by image). Intervals are cut to the metric's range; losses are not compared (each is its own model's loss).

    create_repeats(...)      N queued runs with seeds seed, seed+1, ... sharing a group
    group_runs(group)        the group's runs (selector)
    summarise(values)        n, mean, sd, 95% interval
    group_summary(runs)      per metric: summarise over the finished runs
    compare_groups(a, b)     per metric: both summaries, the difference, its interval and a verdict
    retrieval_summary(runs)  a captioner group against its trivial captioners (captioner_judge)
"""
from __future__ import annotations

import math
import re
import secrets

from django.db import transaction

from .metric_keys import clip_to_range, flatten_metrics, ordered_keys
from .models import TrainingRun

MAX_REPEATS = 20
CONFIDENCE = 0.95
# Metrics where lower is better; everything else is read as higher-is-better.
LOWER_IS_BETTER = ("loss", "mse", "mae", "ece", "brier", "perplexity", "entropy", "error")
# Bookkeeping numbers of a run, not results: left out of the group tables.
NOT_METRICS = ("best_epoch", "epochs_run", "stopped_early", "eval_cap", "eval_images", "n_test", "seed",
               "retrieval_verdict", "intervals", "per_image")
# Bookkeeping of a captioner's baselines (how many neighbours, on how many images): not results either.
BASELINE_BOOKKEEPING = (".k", ".images")
# A loss is the loss of its own model: two configs' losses are not compared as if they were metrics.
NOT_COMPARED = ("loss",)


def create_repeats(trainer_name: str, config: dict, repeats: int, *, release=None, campaign=None, user=None,
                   name: str = "") -> list[TrainingRun]:
    """Validate and store ``repeats`` queued runs of one config with seeds seed, seed+1, ... in one new
    group (one run and no group when repeats is 1). Nothing is stored when a setting is bad
    (TrainingError from create_run) or repeats is out of range (ValueError)."""
    from .engine import create_run
    from .trainers import get_trainer

    repeats = int(repeats)
    if not 1 <= repeats <= MAX_REPEATS:
        raise ValueError(f"repeats must be between 1 and {MAX_REPEATS}.")
    if repeats == 1:
        return [create_run(trainer_name, config, release=release, campaign=campaign, user=user, name=name)]
    first_seed = int(get_trainer(trainer_name).config(config)["seed"])
    group = f"{trainer_name[:40]}-{secrets.token_hex(4)}"
    runs = []
    with transaction.atomic():
        for k in range(repeats):
            seed = first_seed + k
            label = f"{name} (seed {seed})" if name else ""
            run = create_run(trainer_name, {**config, "seed": seed}, release=release, campaign=campaign, user=user,
                             name=label)
            run.group = group
            run.save(update_fields=["group"])
            runs.append(run)
    return runs


def group_runs(group: str):
    return TrainingRun.objects.filter(group=group).select_related("release", "campaign").order_by("pk")


def is_metric(key: str) -> bool:
    if key.startswith("caption_baselines.") and key.endswith(BASELINE_BOOKKEEPING):
        return False
    return not any(key.startswith(skip) for skip in NOT_METRICS)


def is_compared(key: str) -> bool:
    """Whether two groups (different configs, so different models) are compared on this metric: not on losses."""
    words = re.split(r"[_\-\s]+", key.rsplit(".", 1)[-1].lower())
    return not any(word in NOT_COMPARED for word in words)


def summarise_metric(key: str, values: list[float]) -> dict:
    """summarise(), its interval cut to the metric's range (metric_keys.METRIC_RANGES)."""
    out = summarise(values)
    out["low"], out["high"] = clip_to_range(key, out["low"], out["high"])
    return out


def lower_is_better(key: str) -> bool:
    """A loss, an error or a calibration gap: judged by its last name's words ("val_loss", "test_mse")."""
    words = re.split(r"[_\-\s]+", key.rsplit(".", 1)[-1].lower())
    return any(word in LOWER_IS_BETTER for word in words)


def _t_quantile(df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) if df > 0 else math.inf


def summarise(values: list[float]) -> dict:
    """n, mean, sample sd (0 for one value) and the 95% t-interval of the mean (None for one value)."""
    n = len(values)
    if not n:
        return {"n": 0, "mean": None, "sd": None, "low": None, "high": None}
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = _t_quantile(n - 1) * sd / math.sqrt(n) if n > 1 else None
    return {"n": n, "mean": mean, "sd": sd, "low": mean - half if half is not None else None,
            "high": mean + half if half is not None else None}


def _flat(run) -> dict:
    return {k: v for k, v in flatten_metrics(run.metrics).items() if is_metric(k) and math.isfinite(v)}


def _finished(runs) -> list:
    return sorted((r for r in runs if r.status == TrainingRun.Status.DONE),
                  key=lambda r: (int((r.config or {}).get("seed", 0) or 0), r.pk))


def group_summary(runs) -> list[dict]:
    """[{key, n, mean, sd, low, high}] over the group's finished runs, one row per metric any has."""
    flats = [_flat(r) for r in _finished(runs)]
    keys = ordered_keys(flats)
    return [{"key": key, **summarise_metric(key, [f[key] for f in flats if key in f])} for key in keys]


def difference(a: list[float], b: list[float], paired: bool) -> dict:
    """The mean difference a - b, its 95% interval, the p-value and the test used. Paired: a[i] and b[i]
    ran the same seed. With fewer than two values on a side there is no interval (None)."""
    from scipy import stats

    if paired and len(a) == len(b) and len(a) > 1:
        d = [x - y for x, y in zip(a, b)]
        s = summarise(d)
        if s["sd"] <= 1e-12 * max(1.0, abs(s["mean"])):  # the same gain on every seed: no t statistic
            p = 1.0 if abs(s["mean"]) <= 1e-12 else 0.0
        else:
            p = float(stats.ttest_rel(a, b).pvalue)
        return {"test": "paired t-test over seeds", "diff": s["mean"], "low": s["low"], "high": s["high"], "p": p}
    if len(a) < 2 or len(b) < 2:
        diff = (sum(a) / len(a) - sum(b) / len(b)) if a and b else None
        return {"test": "too few runs for a test", "diff": diff, "low": None, "high": None, "p": None}
    sa, sb = summarise(a), summarise(b)
    va, vb = sa["sd"] ** 2 / sa["n"], sb["sd"] ** 2 / sb["n"]
    diff = sa["mean"] - sb["mean"]
    if va + vb == 0:
        return {"test": "Welch's t-test", "diff": diff, "low": diff, "high": diff, "p": 1.0 if diff == 0 else 0.0}
    df = (va + vb) ** 2 / ((va ** 2 / (sa["n"] - 1)) + (vb ** 2 / (sb["n"] - 1)))
    half = _t_quantile(df) * math.sqrt(va + vb)
    p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return {"test": "Welch's t-test", "diff": diff, "low": diff - half, "high": diff + half, "p": p}


def verdict(key: str, test: dict) -> str:
    """"better", "worse" (group a against b, for this metric's direction), "same" (not distinguishable:
    the interval holds zero) or "unknown" (no interval)."""
    if test["low"] is None or test["high"] is None:
        return "unknown"
    if test["low"] <= 0 <= test["high"]:
        return "same"
    higher = test["low"] > 0
    return "better" if higher != lower_is_better(key) else "worse"


def _seeds(runs) -> list[int]:
    return [int((r.config or {}).get("seed", 0) or 0) for r in runs]


def compare_groups(runs_a, runs_b) -> dict:
    """Both groups' summaries per metric, the difference a - b with its interval, and a verdict.
    Paired by seed index when both groups finished the same seeds."""
    fa, fb = _finished(runs_a), _finished(runs_b)
    paired = len(fa) > 1 and _seeds(fa) == _seeds(fb)
    flats_a, flats_b = [_flat(r) for r in fa], [_flat(r) for r in fb]
    rows = []
    for key in ordered_keys(flats_a + flats_b):
        a = [f[key] for f in flats_a if key in f]
        b = [f[key] for f in flats_b if key in f]
        if not a or not b or not is_compared(key):
            continue
        both = paired and len(a) == len(b) == len(fa)
        test = image_bootstrap(fa, fb) if key == "CIDEr" else None
        test = test or difference(a, b, both)
        test["low"], test["high"] = clip_to_range(key, test["low"], test["high"], difference=True)
        rows.append({"key": key, "a": summarise_metric(key, a), "b": summarise_metric(key, b), "test": test,
                     "verdict": verdict(key, test)})
    retrieval_a, retrieval_b = retrieval_summary(fa), retrieval_summary(fb)
    return {"paired": paired, "rows": rows, "n_a": len(fa), "n_b": len(fb), "retrieval_a": retrieval_a,
            "retrieval_b": retrieval_b, "retrieval_pairs": [("A", retrieval_a), ("B", retrieval_b)]}


def image_bootstrap(runs_a, runs_b, samples: int = 1000, seed: int = 20150505) -> dict | None:
    """Group a's CIDEr minus group b's, with a 95% interval from a bootstrap over both seeds and test images: each
    draw resamples each group's runs and, paired across the groups, the test images all runs scored. None when a
    run has no per-image scores or the runs share no image."""
    import numpy as np

    tables = []
    for runs in (runs_a, runs_b):
        per = [(r.metrics or {}).get("per_image") or {} for r in runs]
        if not per or not all(p.get("CIDEr") for p in per):
            return None
        tables.append([{str(i): v for i, v in zip(p["image_ids"], p["CIDEr"])} for p in per])
    common = set.intersection(*(set(t) for group in tables for t in group))
    if len(common) < 2:
        return None
    images = sorted(common)
    a, b = (np.array([[t[i] for i in images] for t in group]) for group in tables)  # [runs, images]
    rng = np.random.default_rng(seed)
    diffs = np.empty(samples)
    for s in range(samples):
        idx = rng.integers(0, len(images), len(images))
        ra, rb = rng.integers(0, len(a), len(a)), rng.integers(0, len(b), len(b))
        diffs[s] = a[ra][:, idx].mean() - b[rb][:, idx].mean()
    low, high = np.percentile(diffs, [2.5, 97.5])
    return {"test": f"bootstrap over seeds and {len(images)} test images (paired by image)",
            "diff": float(a.mean() - b.mean()), "low": float(low), "high": float(high), "p": None}


def retrieval_summary(runs) -> dict | None:
    """A captioner group's finished runs against their trivial captioners: mean CIDEr of the model, of retrieval
    and of the most frequent caption, and how many runs do not beat retrieval; None when no run has baselines."""
    judged = [r for r in runs if (r.metrics or {}).get("caption_baselines")]
    if not judged:
        return None

    def mean_of(values):
        values = [v for v in values if isinstance(v, (int, float))]
        return sum(values) / len(values) if values else None

    bases = [(r.metrics["caption_baselines"]) for r in judged]
    model = mean_of([r.metrics.get("CIDEr") for r in judged])
    retrieval = mean_of([(b.get("retrieval") or {}).get("CIDEr") for b in bases])
    frequent = mean_of([(b.get("most_frequent") or {}).get("CIDEr") for b in bases])
    below = sum(1 for r in judged if ((r.metrics.get("retrieval_verdict") or {}).get("beats_retrieval") is False))
    below_frequent = model is not None and frequent is not None and model <= frequent
    return {"runs": len(judged), "model": model, "retrieval": retrieval, "most_frequent": frequent,
            "below_retrieval": below, "below_most_frequent": below_frequent,
            "notes": sorted({n for b in bases for n in b.get("notes") or () if n.startswith("retrieval left out")})}
