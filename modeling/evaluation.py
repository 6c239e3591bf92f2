"""Honest evaluation of a binary classifier (the fluency classifier, and later informativeness and
GOOD/BAD): both classes' precision, recall and F1, the confusion matrix, calibration (reliability bins
and expected calibration error), the majority-class baseline, and the verdict "beats majority".

The headline is macro F1, the mean of the two classes' F1: a constant classifier scores exactly the
majority baseline on it, however unbalanced the labels, so "says fluent to everything" can never look
like a model. Everything here is plain Python over lists, so it runs in a test, a worker and a benchmark
alike.
"""
from __future__ import annotations

import math
from statistics import mean, pstdev

# A version must beat the majority class's macro F1 by this much to be called a model.
MAJORITY_MARGIN = 0.05
CHANCE_MACRO_F1 = 0.5
RELIABILITY_BINS = 10
SUMMARY_KEYS = ("macro_f1", "accuracy", "f1", "f1_negative", "precision", "recall", "ece", "brier")


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _class_scores(tp: int, fp: int, fn: int) -> dict:
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    f1 = _ratio(2 * precision * recall, precision + recall)
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "support": tp + fn}


def confusion(y_true: list[int], y_pred: list[int]) -> dict:
    pairs = list(zip(y_true, y_pred))
    return {"tp": sum(1 for t, p in pairs if t == 1 and p == 1), "fp": sum(1 for t, p in pairs if t == 0 and p == 1),
            "fn": sum(1 for t, p in pairs if t == 1 and p == 0), "tn": sum(1 for t, p in pairs if t == 0 and p == 0)}


def reliability(y_true: list[int], probs: list[float], bins: int = RELIABILITY_BINS) -> tuple[list[dict], float]:
    """Equal-width bins of the predicted probability of class 1: per bin the count, the mean predicted
    probability and the observed share of class 1; and the expected calibration error (the bins' gaps
    weighted by their counts; Guo et al. 2017, "On Calibration of Modern Neural Networks")."""
    rows, ece, n = [], 0.0, len(y_true)
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [(t, p) for t, p in zip(y_true, probs) if lo <= p < hi or (b == bins - 1 and p == 1.0)]
        if not members:
            rows.append({"lo": lo, "hi": hi, "n": 0, "mean_prob": None, "frac_pos": None})
            continue
        mean_prob = sum(p for _, p in members) / len(members)
        frac_pos = sum(t for t, _ in members) / len(members)
        ece += len(members) / n * abs(mean_prob - frac_pos)
        rows.append({"lo": lo, "hi": hi, "n": len(members), "mean_prob": round(mean_prob, 4),
                     "frac_pos": round(frac_pos, 4)})
    return rows, round(ece, 4)


def binary_report(y_true: list[int], probs: list[float], threshold: float = 0.5) -> dict:
    """Everything a curator needs to judge a binary classifier on held-out items.

    ``probs``: predicted probability of class 1 (fluent); predicted 1 when prob > threshold. The flat
    keys ``precision``, ``recall``, ``f1`` are class 1's (seed 004 reports those); ``f1_negative`` is
    class 0's; ``macro_f1`` their mean."""
    y_true = [int(t) for t in y_true]
    probs = [float(p) for p in probs]
    if len(y_true) != len(probs):
        raise ValueError("one probability per label")
    y_pred = [1 if p > threshold else 0 for p in probs]
    cm = confusion(y_true, y_pred)
    pos = _class_scores(cm["tp"], cm["fp"], cm["fn"])
    neg = _class_scores(cm["tn"], cm["fn"], cm["fp"])
    bins, ece = reliability(y_true, probs)
    n = len(y_true)
    brier = sum((p - t) ** 2 for t, p in zip(y_true, probs)) / n if n else 0.0
    return {"n": n, "accuracy": round(_ratio(cm["tp"] + cm["tn"], n), 4),
            "macro_f1": round((pos["f1"] + neg["f1"]) / 2, 4),
            "precision": pos["precision"], "recall": pos["recall"], "f1": pos["f1"],
            "f1_negative": neg["f1"], "classes": {"1": pos, "0": neg}, "confusion": cm,
            "ece": ece, "brier": round(brier, 4), "reliability": bins, "threshold": threshold}


def majority_label(train_labels: list[int]) -> int:
    """The more frequent training label (ties: 1)."""
    ones = sum(int(t) for t in train_labels)
    return 1 if ones * 2 >= len(train_labels) else 0


def majority_baseline(train_labels: list[int], test_labels: list[int]) -> dict:
    """The constant classifier that always answers the training split's majority label, scored as a
    model: its probability is the training share of class 1 (so it is as calibrated as a constant can be)."""
    label = majority_label(train_labels)
    share = _ratio(sum(int(t) for t in train_labels), len(train_labels))
    prob = max(share, 0.500001) if label == 1 else share  # a tie goes to 1, as the label does
    report = binary_report(test_labels, [prob] * len(test_labels))
    report["label"] = label
    return report


def summarise(reports: list[dict], keys=SUMMARY_KEYS) -> dict:
    """{key: {"mean", "sd", "values"}} over folds (population sd: the folds are all there is)."""
    out = {}
    for key in keys:
        values = [r[key] for r in reports if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
        if values:
            out[key] = {"mean": round(mean(values), 4), "sd": round(pstdev(values), 4) if len(values) > 1 else 0.0,
                        "values": [round(v, 4) for v in values]}
    return out


def verdict(metrics: dict, margin: float = MAJORITY_MARGIN) -> dict:
    """Does the model beat the majority class (and chance) by ``margin`` macro F1? Cross-validated means when the
    metrics hold a ``cv`` block, else the held-out split (``report`` and ``baselines.majority``). The older,
    majority-only verdict: the engine uses it only for a trainer that gives no per-item probabilities; every
    other version is judged by modeling.verdicts against all the baselines, and this one reads as "legacy" there.

    Returns {"beats_majority": bool | None, "model": f, "majority": f, "margin": m, "basis": "cv" | "test",
    "text": "..."}; None when there is nothing to judge (no held-out items)."""
    cv = metrics.get("cv") or {}
    if cv.get("model", {}).get("macro_f1") and cv.get("majority", {}).get("macro_f1"):
        model, majority, basis = cv["model"]["macro_f1"]["mean"], cv["majority"]["macro_f1"]["mean"], "cv"
        where = f"{cv.get('folds', '?')}-fold cross-validation"
    else:
        report = metrics.get("report") or {}
        base = (metrics.get("baselines") or {}).get("majority") or {}
        if not report.get("n") or "macro_f1" not in base:
            return {"beats_majority": None, "basis": "none", "margin": margin,
                    "text": "not judged: no held-out items"}
        model, majority, basis, where = report["macro_f1"], base["macro_f1"], "test", "the held-out split"
    # The bar is the better of the two trivial answers: the constant majority label, and a guess drawn
    # with the class shares, whose expected macro F1 is 1/2 whatever the balance (each class's F1 is its
    # share). A model that answers noise beats the constant on macro F1 but not chance.
    bar = max(majority, CHANCE_MACRO_F1)
    beats = model - bar >= margin
    text = (f"macro F1 {model:.3f} against the majority class's {majority:.3f} (chance {CHANCE_MACRO_F1:.2f}) "
            f"on {where}: " + ("beats majority" if beats else f"does not beat majority (needs {bar + margin:.3f})"))
    return {"beats_majority": beats, "model": round(model, 4), "majority": round(majority, 4),
            "chance": CHANCE_MACRO_F1, "margin": margin, "basis": basis, "text": text}


__all__ = ["binary_report", "majority_baseline", "majority_label", "summarise", "verdict",
           "reliability", "confusion", "MAJORITY_MARGIN"]


def unusable_note(kind: str, metrics: dict) -> str:
    """Why a freshly trained version cannot be used ("" when it can): a captioner that says the same thing, or only
    unknown words, for every evaluated image learned nothing worth generating with (issue 22 saw one trained on
    11 captions answer "<unk>" to everything)."""
    if kind != "captioner":
        return ""
    diversity = (metrics or {}).get("diversity") or {}
    images = int((metrics or {}).get("eval_images") or 0)
    distinct = round(float(diversity.get("unique_captions") or 0.0) * images)  # a share of the captions
    if images >= 5 and distinct <= 1:
        return f"the same caption for all {images} evaluated images"
    if images and int(diversity.get("vocabulary") or 0) <= 2:
        return f"a vocabulary of {int(diversity.get('vocabulary') or 0)} word(s) over {images} evaluated images"
    return ""
