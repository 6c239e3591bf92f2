"""Bootstrap intervals over test images (Efron & Tibshirani 1993; for MT metrics, Koehn 2004, "Statistical
Significance Tests for Machine Translation Evaluation"): resample the images with replacement, recompute the corpus
score, and take the 2.5th and 97.5th percentiles. Paired: both systems are scored on the same resampled images, so
the interval is of their difference on one test split, not of two unrelated draws.

CIDEr and ROUGE-L corpus scores are means of per-image scores (the document frequencies come from the references,
which do not change between systems), so resampling the per-image scores is exact. Corpus BLEU-4 is not a mean: it
is recomputed from the resampled images' summed n-gram counts and lengths, as pycocoevalcap computes it.
"""
from __future__ import annotations

import numpy as np

SAMPLES = 1000
CONFIDENCE = 0.95
SEED = 20150505  # fixed: the same run gives the same interval on every page
_TINY, _SMALL = 1e-15, 1e-9  # pycocoevalcap's smoothing of BLEU's precisions


def _indices(n: int, samples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(samples, n))


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def mean_interval(values, samples: int = SAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """95% interval of the mean of per-image scores; None with fewer than two images."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return None
    return _percentiles(v[_indices(v.size, samples, seed)].mean(axis=1))


def paired_difference(a, b, samples: int = SAMPLES, seed: int = SEED) -> dict:
    """{"diff": mean(a - b), "low", "high" (None with fewer than two images), "n"}: a[i] and b[i] score image i."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("paired scores need the same images on both sides")
    d = a - b
    out = {"diff": float(d.mean()) if d.size else None, "low": None, "high": None, "n": int(d.size)}
    if d.size >= 2:
        out["low"], out["high"] = _percentiles(d[_indices(d.size, samples, seed)].mean(axis=1))
    return out


def excludes_zero(test: dict) -> bool:
    return test.get("low") is not None and (test["low"] > 0 or test["high"] < 0)


def bleu_from_counts(counts: np.ndarray, n: int = 4) -> np.ndarray:
    """Corpus BLEU-n from summed counts [..., 2 + 2n] = testlen, reflen, guess_1..n, correct_1..n."""
    testlen, reflen = counts[..., 0], counts[..., 1]
    guess, correct = counts[..., 2:2 + n], counts[..., 2 + n:2 + 2 * n]
    score = np.prod((correct + _TINY) / (guess + _SMALL), axis=-1) ** (1.0 / n)
    ratio = (testlen + _TINY) / (reflen + _SMALL)
    penalty = np.where(ratio < 1, np.exp(1 - 1 / np.maximum(ratio, _TINY)), 1.0)
    return score * penalty


def bleu_interval(counts, samples: int = SAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """95% interval of corpus BLEU-4 from per-image counts [N, 10] (metrics.bleu_counts)."""
    c = np.asarray(counts, dtype=np.float64)
    if c.shape[0] < 2:
        return None
    idx = _indices(c.shape[0], samples, seed)
    weights = np.zeros((samples, c.shape[0]))
    np.add.at(weights, (np.repeat(np.arange(samples), c.shape[0]), idx.ravel()), 1.0)
    return _percentiles(bleu_from_counts(weights @ c))
