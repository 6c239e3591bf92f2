"""Agreement: Krippendorff's alpha over the campaign, and each worker's alpha with the rest."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def krippendorff_alpha(parts: pd.DataFrame, metric: str) -> tuple[float | None, int]:
    """Krippendorff's alpha over units (task, part) with at least two votes.

    Alpha depends only on the multiset of values within each unit (the coincidence matrix), not on
    which worker gave them, so the reliability matrix is built with one row per vote slot
    (1st, 2nd, ... vote of a unit) instead of one row per worker: the same alpha as the
    workers x items matrix, with max-votes-per-item rows instead of thousands of workers.
    Returns (alpha or None, number of units used)."""
    import krippendorff

    if parts.empty:
        return None, 0
    column = "cat" if metric == "nominal" else "label"
    frame = parts[["task", "part", column]].copy()
    size = frame.groupby(["task", "part"])[column].transform("size")
    frame = frame[size >= 2]
    if frame.empty:
        return None, 0
    if metric == "nominal":
        codes, _ = pd.factorize(frame[column])
        values = codes.astype(float)
    else:
        values = frame[column].astype(float).to_numpy()
    unit = frame.groupby(["task", "part"]).ngroup().to_numpy()
    slot = frame.groupby(["task", "part"]).cumcount().to_numpy()
    n_units = int(unit.max()) + 1
    if len(np.unique(values)) < 2:
        return None, n_units  # one value everywhere: no disagreement to measure, alpha undefined
    matrix = np.full((int(slot.max()) + 1, n_units), np.nan)
    matrix[slot, unit] = values
    try:
        value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=metric))
    except (ValueError, ZeroDivisionError):
        return None, n_units
    return (round(value, 6) if math.isfinite(value) else None), n_units


def worker_alpha(parts: pd.DataFrame, metric: str, others: pd.DataFrame | None = None,
                 min_pairs: int = 2) -> dict[int, dict]:
    """Each worker's Krippendorff alpha with the rest of the crowd: every value the worker gave is
    paired with every other worker's value on the same unit (task, part), each pair a unit of two
    values, and alpha is computed over those pairs (observed disagreement of the worker with the
    others against the disagreement expected from the values in those pairs). 1 is perfect
    agreement, 0 is chance, below 0 is systematic disagreement. Workers with fewer than
    ``min_pairs`` pairs, or whose pairs hold a single value, get None. ``others`` (default
    ``parts``): whose values a worker is compared with (the aggregation passes the unblocked ones).
    Returns {worker: {"alpha": float | None, "pairs": int}}."""
    import krippendorff

    if parts.empty or metric is None:
        return {}
    column = "cat" if metric == "nominal" else "label"
    others = parts if others is None else others
    both = pd.concat([parts, others])[column]
    codes = {v: float(i) for i, v in enumerate(pd.unique(both))} if metric == "nominal" else None

    def frame_of(p):
        f = p[["task", "part", "worker", column]].rename(columns={column: "v"})
        return f.assign(v=f["v"].map(codes).astype(float) if codes is not None else f["v"].astype(float))

    pairs = frame_of(parts).merge(frame_of(others), on=["task", "part"], suffixes=("", "_o"))
    pairs = pairs[pairs["worker"] != pairs["worker_o"]]
    out: dict[int, dict] = {}
    for worker, group in pairs.groupby("worker"):
        n = len(group)
        value = None
        if n >= min_pairs and len(np.unique(np.concatenate([group["v"].to_numpy(), group["v_o"].to_numpy()]))) > 1:
            try:
                a = float(krippendorff.alpha(reliability_data=np.vstack([group["v"].to_numpy(), group["v_o"].to_numpy()]),
                                             level_of_measurement=metric))
                value = round(a, 4) if math.isfinite(a) else None
            except (ValueError, ZeroDivisionError):
                value = None
        out[int(worker)] = {"alpha": value, "pairs": int(n)}
    return out
