"""The model-based methods: Dawid-Skene, GLAD and MACE over each dimension's categorical labels,
and Bradley-Terry over the pairs implied by ratings of candidates shown together (crowd-kit).

Each looks at every vote of the campaign at once (worker confusion matrices, item difficulties,
scores), so they cannot be updated task by task: they run on demand and on a bounded schedule
(``annotation.aggregation.incremental.models_due``) in the low-priority ``aggregate`` queue.
GLAD and MACE run only up to ``ANNOTATION_SLOW_METHODS_MAX_VOTES`` votes per dimension: they are
iterative optimisers that cost seconds per few thousand votes.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
from django.conf import settings

from .frames import Results

log = logging.getLogger(__name__)

MODEL_METHODS = ("dawid_skene", "glad", "mace", "bradley_terry")


def _slow_limit() -> int:
    return int(getattr(settings, "ANNOTATION_SLOW_METHODS_MAX_VOTES", 20000))


def _crowd_frame(parts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """crowd-kit input (worker, task, label) with task = an integer key per (task, part)."""
    keys = parts[["task", "part"]].drop_duplicates().reset_index(drop=True)
    keys["key"] = np.arange(len(keys))
    merged = parts.merge(keys, on=["task", "part"], how="left")
    data = pd.DataFrame({"worker": merged["worker"].to_numpy(), "task": merged["key"].to_numpy(),
                         "label": merged["cat"].to_numpy()})
    return data, keys


def _best(probas: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Most probable label, its probability, and whether another label ties it."""
    values = probas.to_numpy(dtype=float)
    best = values.max(axis=1)
    ties = (np.isclose(values, best[:, None])).sum(axis=1) > 1
    labels = probas.columns.to_numpy()[values.argmax(axis=1)]
    return (pd.Series(labels, index=probas.index), pd.Series(best, index=probas.index),
            pd.Series(ties, index=probas.index))


def categorical(parts: pd.DataFrame, results: Results, dim: str, majority: dict) -> dict:
    """Dawid-Skene, GLAD and MACE on one dimension (``majority``: {(task, part): (label,
    confidence)} of the per-task pass, used where a method cannot run). Returns {"consensus": Series by key,
    "reliability": {worker: float}, "keys": DataFrame} for the per-worker figures."""
    from crowdkit.aggregation import GLAD, MACE, DawidSkene

    data, keys = _crowd_frame(parts)
    index = keys["key"].to_numpy()
    tasks, part_names = keys["task"].to_numpy(), keys["part"].to_numpy()
    n_votes = data.groupby("task").size().reindex(index).to_numpy()

    def emit(method, labels, confidences, details=None):
        labels = labels.reindex(index).to_numpy()
        confidences = confidences.reindex(index).to_numpy()
        for i in range(len(index)):
            results.add(tasks[i], part_names[i], method, labels[i], confidences[i], n_votes[i],
                        details[i] if details is not None else None)

    known = [majority.get((int(t), p), (None, None)) for t, p in zip(tasks, part_names)]
    mv_label = pd.Series([k[0] for k in known], index=index, dtype=object)
    mv_conf = pd.Series([k[1] for k in known], index=index, dtype=object)

    def fallback(method: str, reason: str):
        results.note(f"{method} ({dim}): {reason}; majority vote used instead")
        emit(method, mv_label, mv_conf, [{"fallback": "majority", "reason": reason}] * len(index))

    n_workers = data["worker"].nunique()
    n_labels = data["label"].nunique()
    degenerate = ("only one worker" if n_workers < 2 else
                  "only one label was given" if n_labels < 2 else None)
    consensus = mv_label
    reliability: dict = {}
    if degenerate:
        fallback("dawid_skene", degenerate)
    else:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                # EM on large sets oscillates around 1e-4 of the (per-item) loss instead of
                # meeting the tolerance; 40 rounds give the same labels within a fraction of a
                # percent at 100k votes in a quarter of the time.
                ds = DawidSkene(n_iter=100 if len(data) <= _slow_limit() else 40, tol=1e-5).fit(data)
            ds_label, ds_conf, _ = _best(ds.probas_)
            emit("dawid_skene", ds_label, ds_conf)
            consensus = ds_label
            reliability = ds_reliability(ds.errors_, ds.priors_)
        except Exception as exc:  # a numerical failure must not lose the other figures
            log.exception("Dawid-Skene failed")
            fallback("dawid_skene", f"failed: {exc}")

    if degenerate:
        results.note(f"glad, mace ({dim}): skipped, {degenerate}")
    elif len(data) > _slow_limit():
        results.note(f"glad, mace ({dim}): skipped, {len(data)} votes is over the limit of {_slow_limit()}")
    else:
        for method, model in (("glad", lambda: GLAD(n_iter=20)),
                              ("mace", lambda: MACE(n_iter=20, n_restarts=2, random_state=0))):
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    label, conf, _ = _best(model().fit_predict_proba(data))
                emit(method, label, conf)
            except Exception as exc:
                log.exception("%s failed", method)
                results.note(f"{method} ({dim}): failed: {exc}")
    return {"consensus": consensus, "keys": keys, "reliability": reliability}


def ds_reliability(errors: pd.DataFrame, priors: pd.Series) -> dict:
    """A worker's expected accuracy under Dawid-Skene: the diagonal of their confusion matrix
    (P(says c | truth c)) weighted by the class priors. Weighting by the priors keeps a rare class
    that a worker never used from dragging the figure to zero the way a plain mean would."""
    stacked = errors.stack()
    stacked.index = stacked.index.set_names(["worker", "observed", "truth"])
    frame = stacked.reset_index(name="p")
    diagonal = frame[frame["observed"] == frame["truth"]].copy()
    diagonal["w"] = diagonal["truth"].map(priors).astype(float)
    diagonal["wp"] = diagonal["p"].astype(float) * diagonal["w"]
    total = float(priors.sum()) or 1.0
    return {int(w): round(float(v) / total, 6) for w, v in diagonal.groupby("worker")["wp"].sum().items()}


def bradley_terry(parts: pd.DataFrame, results: Results) -> None:
    """Bradley-Terry per dimension from the pairs each vote implies: of two candidates one worker
    rated together, the higher rating wins; equal ratings give no comparison."""
    from crowdkit.aggregation import BradleyTerry

    for dim, group in parts.groupby("dim"):
        g = group.assign(item=group["task"].astype(str) + "|" + group["part"],
                         x=group["label"].astype(float))[["vote", "worker", "item", "x", "task", "part"]]
        pairs = g.merge(g, on="vote", suffixes=("_l", "_r"))
        pairs = pairs[(pairs["item_l"] < pairs["item_r"]) & (pairs["x_l"] != pairs["x_r"])]
        if pairs.empty:
            results.note(f"bradley_terry ({dim}): no comparisons (every pair tied)")
            continue
        data = pd.DataFrame({"worker": pairs["worker_l"].to_numpy(), "left": pairs["item_l"].to_numpy(),
                             "right": pairs["item_r"].to_numpy(),
                             "label": np.where(pairs["x_l"] > pairs["x_r"], pairs["item_l"], pairs["item_r"])})
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                scores = BradleyTerry(n_iter=100).fit(data).scores_
        except Exception as exc:
            log.exception("Bradley-Terry failed")
            results.note(f"bradley_terry ({dim}): failed: {exc}")
            continue
        compared = pd.concat([data["left"], data["right"]]).value_counts()
        items = g[["item", "task", "part"]].drop_duplicates("item").set_index("item")
        items = items[items.index.isin(scores.index)]
        items["score"] = scores.reindex(items.index).astype(float)
        items["rank"] = items.groupby("task")["score"].rank(ascending=False, method="min")
        for item, row in items.iterrows():
            results.add(row["task"], row["part"], "bradley_terry", round(float(row["score"]), 6), None,
                        compared.get(item, 0), {"rank": int(row["rank"])})
