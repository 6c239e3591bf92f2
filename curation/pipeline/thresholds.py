"""The threshold search over scored, human-judged items: which cut-off on a score keeps the most of the
positives while the kept set reaches a precision. The calibrated alignment filter (``alignment.calibrate``)
and annotation's filter-against-human comparison (``annotation.filter_vs_human``) both use it.

The direction is the one the scores point (keep when score >= t if positives score higher, i.e. the ROC
AUC is above 0.5, else keep when score <= t; at exactly 0.5 both are tried), and the threshold is the one
with the highest recall whose precision reaches the asked precision (None when none does).
"""
from __future__ import annotations

import numpy as np


def _auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """ROC AUC by the Mann-Whitney rank sum (ties count half); None with one class only."""
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _best_threshold(scores: np.ndarray, positive: np.ndarray, precision: float, direction: str) -> dict | None:
    """Highest-recall threshold reaching ``precision`` for one direction, or None."""
    signed = scores if direction == ">=" else -scores
    order = np.argsort(-signed, kind="stable")
    s, pos = signed[order], positive[order]
    tp = np.cumsum(pos)
    kept = np.arange(1, len(s) + 1)
    last = np.r_[s[1:] != s[:-1], True]  # keep every item scoring at least this well
    tp, kept, thresholds = tp[last], kept[last], s[last]
    total = int(positive.sum())
    prec = tp / kept
    rec = tp / total
    ok = prec >= precision - 1e-12
    if not ok.any():
        return None
    candidates = np.flatnonzero(ok)
    i = max(candidates, key=lambda j: (rec[j], prec[j]))
    threshold = float(thresholds[i]) if direction == ">=" else float(-thresholds[i])
    return {"threshold": threshold, "direction": direction, "precision": round(float(prec[i]), 4),
            "recall": round(float(rec[i]), 4), "kept": int(kept[i])}


def suggest_threshold(scores, positive, precision: float) -> dict | None:
    """The threshold (and direction) with the highest recall whose precision reaches ``precision``."""
    scores = np.asarray(scores, dtype=float)
    positive = np.asarray(positive, dtype=bool)
    if not len(scores) or not positive.any():
        return None
    auc = _auc(scores, positive)
    if auc is None or auc == 0.5:
        found = [_best_threshold(scores, positive, precision, d) for d in (">=", "<=")]
        options = [o for o in found if o]
        best = max(options, key=lambda o: (o["recall"], o["precision"]), default=None)
    else:
        best = _best_threshold(scores, positive, precision, ">=" if auc > 0.5 else "<=")
    if best is not None:
        best["auc"] = None if auc is None else round(auc, 4)
    return best


__all__ = ["suggest_threshold"]
