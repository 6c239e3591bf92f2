"""One verdict per classifier version: the model against every obvious baseline on the same items, and the
rule that decides whether it may be activated.

The baselines, each scored on exactly the items the model is scored on (cross-validation folds pooled, or
a held-out split, or a learning loop's hold-out), all as macro F1:

- ``majority``: the training split's more frequent label for everything;
- ``chance``: a guess with the class shares, whose expected macro F1 is 0.5 whatever the balance;
- ``length``: seed 004's sentence-length rule (fluent if shorter than the mean length of the fluent
  training sentences; modeling.trainers.fluency_baselines);
- ``wordfreq``: the mean Zipf frequency of the sentence's words (wordfreq's unigram lists), cut at the
  threshold, and in the direction, that score best on the training split; an unusual word choice or a
  garbled token lowers it.

The rule (``RULE``, shown on every page, in the API and the CLI): a version is activatable only when

1. it was evaluated on at least ``MIN_ITEMS`` items,
2. its macro F1 beats the best baseline by at least ``MARGIN``, and
3. the paired bootstrap 95% interval of (model - best baseline) macro F1 lies above zero (resampling the
   items with replacement, both scored on each resample: Efron & Tibshirani 1993, "An Introduction to the
   Bootstrap", ch. 13; Koehn 2004, "Statistical Significance Tests for Machine Translation Evaluation",
   for the paired form).

Otherwise the version is flagged with the reasons ("beats majority but not the length rule", "too few
evaluation items: 21 < 50") and ``modeling.registry.activate`` refuses it unless forced. A trainer gives
the rules their input through ``texts(split) -> list[str]`` (else dict splits with "texts", or lists of
dicts with "text"); without texts only majority and chance are judged, and the verdict says so.
"""
from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MARGIN = 0.05
MIN_ITEMS = 50
CHANCE_MACRO_F1 = 0.5
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
VERSION = 2  # the verdict's format; 1 (or none) is the majority-only verdict of older versions

NAMES = {"majority": "majority", "chance": "chance", "length": "the length rule", "wordfreq": "the word-frequency rule"}
LONG_NAMES = {"majority": "the majority class", "chance": "chance (0.5)", "length": "seed 004's length rule",
              "wordfreq": "the word-frequency rule (mean Zipf frequency)"}
RULE = (f"A version is activated (by hand or by a learning loop) only when, on at least {MIN_ITEMS} evaluation "
        f"items, its macro F1 beats the best of the majority class, chance (0.5), seed 004's length rule and the "
        f"word-frequency rule by at least {MARGIN:.2f}, and the paired bootstrap {int(CONFIDENCE * 100)}% interval "
        f"of the difference excludes zero; otherwise it is flagged and needs force.")
CODES = {"items": "too_few_evaluation_items", "majority": "does_not_beat_majority",
         "baselines": "does_not_beat_baselines", "interval": "interval_includes_zero", "legacy": "not_judged_by_rule"}


# --- the cheap rules --------------------------------------------------------------------------------


def n_words(text: str) -> int:
    return len((text or "").split())


@functools.lru_cache(maxsize=200_000)
def _zipf(word: str, language: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language)


def mean_zipf(text: str, language: str = "en") -> float:
    """The mean Zipf frequency of the text's words (wordfreq's tokenizer); 0 for a text without words."""
    import numpy as np
    from wordfreq import tokenize

    tokens = [t for t in tokenize(text or "", language) if not t.isdigit()]
    return float(np.mean([_zipf(t, language) for t in tokens])) if tokens else 0.0


def fit_threshold(values, labels) -> tuple[float, int]:
    """(threshold, direction) maximising macro F1 on the training items: predict 1 when
    direction * (value - threshold) > 0. Candidates: midpoints between consecutive distinct values."""
    import numpy as np

    values, labels = np.asarray(values, dtype=np.float64), np.asarray(labels, dtype=np.int64)
    distinct = np.unique(values)
    if len(distinct) < 2:
        return float(distinct[0]) if len(distinct) else 0.0, 1
    best = (-1.0, 0.0, 1)
    for cut in (distinct[:-1] + distinct[1:]) / 2:
        for direction in (1, -1):
            score = macro_f1(labels, (direction * (values - cut) > 0).astype(np.int64))
            if score > best[0]:
                best = (score, float(cut), direction)
    return best[1], best[2]


def baseline_predictions(train_texts, train_labels, test_texts, language: str = "en") -> dict:
    """{"majority" | "length" | "wordfreq": {"pred": [0/1 per test item], ...the rule's fitted numbers}},
    every rule fitted on the training items only."""
    train_labels = [int(v) for v in train_labels]
    ones = sum(train_labels)
    label = 1 if ones * 2 >= len(train_labels) else 0
    out = {"majority": {"pred": [label] * len(test_texts), "label": label}}
    fluent = [n_words(t) for t, y in zip(train_texts, train_labels) if y == 1]
    cut = sum(fluent) / len(fluent) if fluent else 0.0
    out["length"] = {"pred": [1 if n_words(t) < cut else 0 for t in test_texts], "threshold": round(cut, 4)}
    train_freq = [mean_zipf(t, language) for t in train_texts]
    threshold, direction = fit_threshold(train_freq, train_labels)
    out["wordfreq"] = {"pred": [1 if direction * (mean_zipf(t, language) - threshold) > 0 else 0 for t in test_texts],
                       "threshold": round(threshold, 4), "direction": "above" if direction > 0 else "below"}
    return out


# --- scores ----------------------------------------------------------------------------------------


def _f1_parts(y: np.ndarray, p: np.ndarray):
    """Macro F1 along the last axis (0/1 arrays of the same shape): the mean of both classes' F1."""
    import numpy as np

    tp = np.sum((y == 1) & (p == 1), axis=-1)
    tn = np.sum((y == 0) & (p == 0), axis=-1)
    wrong = np.sum(y != p, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pos = np.where(2 * tp + wrong > 0, 2 * tp / np.maximum(2 * tp + wrong, 1), 0.0)
        neg = np.where(2 * tn + wrong > 0, 2 * tn / np.maximum(2 * tn + wrong, 1), 0.0)
    # a class absent from both truth and prediction has F1 0 here, as binary_report counts it
    pos = np.where(tp > 0, pos, 0.0)
    neg = np.where(tn > 0, neg, 0.0)
    return (pos + neg) / 2


def macro_f1(y, p) -> float:
    import numpy as np

    return float(_f1_parts(np.asarray(y, dtype=np.int64), np.asarray(p, dtype=np.int64)))


def bootstrap_interval(y, pred, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
                       confidence: float = CONFIDENCE) -> list[float] | None:
    """Percentile bootstrap interval of one classifier's macro F1 on these items (None under 2 items)."""
    import numpy as np

    y, pred = np.asarray(y, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    if len(y) < 2:
        return None
    idx = np.random.default_rng(seed).integers(0, len(y), size=(resamples, len(y)))
    scores = _f1_parts(y[idx], pred[idx])
    lo, hi = np.quantile(scores, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return [round(float(lo), 4), round(float(hi), 4)]


def bootstrap_interval_mean(y, preds: list, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
                            confidence: float = CONFIDENCE) -> list[float] | None:
    """Percentile bootstrap interval of the mean macro F1 of several classifiers (the random arm's repeats)
    on the same resampled items."""
    import numpy as np

    y = np.asarray(y, dtype=np.int64)
    if len(y) < 2 or not preds:
        return None
    idx = np.random.default_rng(seed).integers(0, len(y), size=(resamples, len(y)))
    scores = np.mean([_f1_parts(y[idx], np.asarray(p, dtype=np.int64)[idx]) for p in preds], axis=0)
    lo, hi = np.quantile(scores, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return [round(float(lo), 4), round(float(hi), 4)]


def paired_interval(y, model_pred, other_pred, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
                    confidence: float = CONFIDENCE) -> list[float] | None:
    """Paired percentile bootstrap interval of macro F1(model) - macro F1(other), both scored on the same
    resampled items; ``other_pred`` None means a constant (chance's 0.5)."""
    import numpy as np

    y, model_pred = np.asarray(y, dtype=np.int64), np.asarray(model_pred, dtype=np.int64)
    if len(y) < 2:
        return None
    idx = np.random.default_rng(seed).integers(0, len(y), size=(resamples, len(y)))
    diff = _f1_parts(y[idx], model_pred[idx])
    diff = diff - (CHANCE_MACRO_F1 if other_pred is None else _f1_parts(y[idx], np.asarray(other_pred)[idx]))
    lo, hi = np.quantile(diff, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return [round(float(lo), 4), round(float(hi), 4)]


# --- the verdict -----------------------------------------------------------------------------------


def judge(y, model_pred, baselines: dict, *, basis: str, where: str, seed: int = 0, note: str = "") -> dict:
    """The verdict on these items. ``baselines``: {"majority" | "length" | "wordfreq": {"pred": [...], ...}}
    (each fitted on the matching training items); chance is added here. ``basis``: "cv", "test" or
    "holdout"; ``where``: the items in words ("5-fold cross-validation, folds pooled")."""
    y = [int(v) for v in y]
    model_pred = [int(v) for v in model_pred]
    n = len(y)
    scored = {"chance": {"macro_f1": CHANCE_MACRO_F1, "pred": None}}
    for name, rule in baselines.items():
        if rule and rule.get("pred") is not None and len(rule["pred"]) == n:
            scored[name] = {**{k: v for k, v in rule.items() if k != "pred"}, "pred": [int(v) for v in rule["pred"]],
                            "macro_f1": round(macro_f1(y, rule["pred"]), 4) if n else 0.0}
    model = round(macro_f1(y, model_pred), 4) if n else 0.0
    order = sorted(scored, key=lambda k: (-scored[k]["macro_f1"], list(NAMES).index(k)))
    best = order[0]
    interval = paired_interval(y, model_pred, scored[best]["pred"], seed=seed) if n else None
    verdict = {
        "format": VERSION, "basis": basis, "where": where, "n": n, "model": model,
        "model_interval": bootstrap_interval(y, model_pred, seed=seed) if n else None,
        "baselines": {k: {kk: vv for kk, vv in v.items() if kk != "pred"} for k, v in scored.items()},
        "best": best, "best_macro_f1": scored[best]["macro_f1"], "difference": round(model - scored[best]["macro_f1"], 4),
        "interval": interval, "margin": MARGIN, "min_items": MIN_ITEMS, "confidence": CONFIDENCE,
        "labels": {"fluent": sum(y), "not_fluent": n - sum(y)},
        "missing": [k for k in ("length", "wordfreq") if k not in scored],
    }
    if note:
        verdict["note"] = note
    verdict.update(_decide(verdict))
    # What older readers of metrics["verdict"] look for.
    verdict["majority"] = scored.get("majority", {}).get("macro_f1")
    verdict["chance"] = CHANCE_MACRO_F1
    verdict["beats_majority"] = bool(n) and model - max(verdict["majority"] or 0.0, CHANCE_MACRO_F1) >= MARGIN
    return verdict


def _decide(v: dict) -> dict:
    """activatable, reasons [{code, text}], headline and text of a verdict's numbers."""
    reasons = []
    order = sorted(v["baselines"], key=list(NAMES).index)
    beaten = [k for k in order if v["model"] - v["baselines"][k]["macro_f1"] >= MARGIN]
    not_beaten = [k for k in order if k not in beaten]
    if not_beaten:
        names = _join([NAMES[k] for k in not_beaten], "or")
        if beaten:
            text = f"beats {_join([NAMES[k] for k in beaten], 'and')} but not {names}"
        else:
            text = f"does not beat {names}"
        code = CODES["majority"] if "majority" in not_beaten or "chance" in not_beaten else CODES["baselines"]
        reasons.append({"code": code, "text": f"{text} (by {MARGIN:.2f} macro F1)"})
    if v["n"] < MIN_ITEMS:
        reasons.append({"code": CODES["items"], "text": f"too few evaluation items: {v['n']} < {MIN_ITEMS}"})
    if v["interval"] is not None and v["interval"][0] <= 0 and not not_beaten:
        reasons.append({"code": CODES["interval"],
                        "text": f"the {int(CONFIDENCE * 100)}% interval of the difference with {NAMES[v['best']]} "
                                f"({v['interval'][0]:+.3f} to {v['interval'][1]:+.3f}) includes zero"})
    activatable = not reasons and v["n"] > 0
    headline = "beats every baseline" if activatable else reasons[0]["text"].split(" (by ")[0] if reasons else \
        "not judged: no evaluation items"
    ci = (f" (95% interval {v['interval'][0]:+.3f} to {v['interval'][1]:+.3f})" if v["interval"] else "")
    text = (f"macro F1 {v['model']:.3f} on {v['n']} items ({v['where']}); best baseline {LONG_NAMES[v['best']]} "
            f"{v['best_macro_f1']:.3f}, difference {v['difference']:+.3f}{ci}: "
            + ("activatable" if activatable else "flagged, " + "; ".join(r["text"] for r in reasons)))
    if v["missing"]:
        text += f" [not computed: {', '.join(NAMES[k] for k in v['missing'])}, the trainer gives no texts]"
    return {"activatable": activatable, "reasons": reasons, "headline": headline, "text": text,
            "code": reasons[0]["code"] if reasons else ""}


def _join(words: list[str], last: str) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def display(metrics: dict | None) -> dict | None:
    """The verdict of a version's (or run's) metrics as every page, the API and the CLI show it:
    {"status": "activatable" | "flagged" | "legacy" | "none", "headline", "text", "activatable", "code",
    ...the stored numbers}; None where there is none (captioners, topic models). An older majority-only
    verdict reads as "legacy": judged before this rule, so not activatable without force."""
    stored = (metrics or {}).get("verdict")
    if not isinstance(stored, dict):
        return None
    if stored.get("format") == VERSION:
        return {**stored, "status": "activatable" if stored.get("activatable") else "flagged"}
    if stored.get("beats_majority") is None:
        return {**stored, "status": "none", "activatable": False, "headline": "not judged",
                "code": "", "text": stored.get("text") or "not judged"}
    old = stored.get("text") or ""
    headline = ("does not beat majority" if stored.get("beats_majority") is False
                else "judged against the majority class only")
    return {**stored, "status": "legacy", "activatable": False, "headline": headline,
            "code": CODES["majority"] if stored.get("beats_majority") is False else CODES["legacy"],
            "text": f"{old} (an older verdict: majority class and chance only, before the baseline rule; "
                    f"activating it needs force)"}


def flagged(metrics: dict | None) -> bool:
    """True when the version has a verdict and it does not allow activation."""
    shown = display(metrics)
    return shown is not None and not shown["activatable"]


def refusal(version, shown: dict) -> tuple[str, str]:
    """(message, code) of a refused activation."""
    return (f"{version} is flagged: {shown['text']}. {RULE} Activate it anyway only on purpose (force).",
            shown["code"] or CODES["legacy"])


# --- judging a trained model -----------------------------------------------------------------------


def split_texts(trainer, split) -> list[str] | None:
    """The rated texts of a split, in the order of its labels, or None when the trainer does not give them."""
    if hasattr(trainer, "texts"):
        return trainer.texts(split)
    if isinstance(split, dict) and isinstance(split.get("texts"), list):
        return list(split["texts"])
    if isinstance(split, list) and all(isinstance(e, dict) and "text" in e for e in split):
        return [e["text"] for e in split]
    return None


def fold_items(trainer, fold, y_true: list[int], probs: list[float], threshold: float = 0.5) -> dict:
    """One fold's (or one split's) contribution to a verdict: labels, the model's 0/1 predictions and
    each baseline's, fitted on the fold's training (and validation) items."""
    from .engine.cv import split_labels

    train_labels = split_labels(trainer, fold.train) + split_labels(trainer, fold.val)
    train_texts = _joined(split_texts(trainer, fold.train), split_texts(trainer, fold.val), fold.val, trainer)
    test_texts = split_texts(trainer, fold.test)
    pred = [1 if p > threshold else 0 for p in probs]
    if train_texts is not None and test_texts is not None and len(test_texts) == len(y_true):
        rules = baseline_predictions(train_texts, train_labels, test_texts)
    else:
        ones = sum(train_labels)
        rules = {"majority": {"pred": [1 if ones * 2 >= len(train_labels) else 0] * len(y_true)}}
    return {"y": list(y_true), "pred": pred, "rules": rules}


def _joined(train, val, val_split, trainer):
    from .engine.cv import split_labels

    if train is None:
        return None
    if val is None:
        return train if not split_labels(trainer, val_split) else None
    return list(train) + list(val)


def pool(parts: list[dict]) -> tuple[list[int], list[int], dict]:
    """The folds' items as one evaluation set: (y, model predictions, {rule: {"pred": [...]}}); a rule
    that some fold lacks is left out."""
    y, pred, rules = [], [], {}
    names = set.intersection(*(set(p["rules"]) for p in parts)) if parts else set()
    for p in parts:
        y += p["y"]
        pred += p["pred"]
        for name in names:
            rules.setdefault(name, {"pred": []})["pred"] += p["rules"][name]["pred"]
    if len(parts) == 1:
        for name in names:
            rules[name].update({k: v for k, v in parts[0]["rules"][name].items() if k != "pred"})
    return y, pred, rules


def judge_parts(parts: list[dict], *, basis: str, where: str, seed: int = 0) -> dict:
    y, pred, rules = pool(parts)
    return judge(y, pred, rules, basis=basis, where=where, seed=seed)


def finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


__all__ = ["MARGIN", "MIN_ITEMS", "RULE", "CODES", "judge", "judge_parts", "display", "flagged", "refusal",
           "baseline_predictions", "bootstrap_interval", "paired_interval", "macro_f1", "fold_items", "mean_zipf"]
