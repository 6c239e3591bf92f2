"""The model-based methods: Dawid-Skene, GLAD and MACE over each dimension's categorical labels and
ROVER over written captions (crowd-kit), and Bradley-Terry over the pairs implied by ratings of
candidates shown together (``annotation.bradley_terry``).

Each looks at every vote of the campaign at once (worker confusion matrices, item difficulties,
scores), so they cannot be updated task by task: they run on demand and on a bounded schedule
(``annotation.aggregation.incremental.models_due``) in the low-priority ``aggregate`` queue.
GLAD and MACE run only up to ``ANNOTATION_SLOW_METHODS_MAX_VOTES`` votes per dimension: they are
iterative optimisers that cost seconds per few thousand votes.

The pass prepares every dimension's frame here, then ``fit`` runs all the fits at once in a
process of its own (``annotation.crowd_models``; ``ANNOTATION_MODELS_PROCESS``), so crowd-kit and
its scientific stack never stay in the worker; the rows are emitted here from what comes back.
"""
from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
from django.conf import settings

from ..crowd_models import ds_reliability, fit_all
from .frames import Results
from .per_task import text_frame

log = logging.getLogger(__name__)

MODEL_METHODS = ("dawid_skene", "glad", "mace", "bradley_terry")


class ModelProcessError(RuntimeError):
    """The process running the fits failed as a whole (exit status, timeout, unreadable output)."""


def _slow_limit() -> int:
    return int(settings.ANNOTATION_SLOW_METHODS_MAX_VOTES)


def fit(jobs: list[tuple[str, dict]]) -> list[dict]:
    """The results of ``annotation.crowd_models.fit_all(jobs)``, computed in a child process
    (``ANNOTATION_MODELS_PROCESS = "subprocess"``, the default) or in this one (``"inline"``).
    A failure of the whole process becomes an error result for every job."""
    if not jobs:
        return []
    if settings.ANNOTATION_MODELS_PROCESS == "inline":
        return fit_all(jobs)
    root = str(settings.BASE_DIR)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    timeout = float(settings.ANNOTATION_MODELS_TIMEOUT)
    try:
        proc = subprocess.run([sys.executable, "-m", "annotation.crowd_models"], cwd=root, env=env,
                              input=pickle.dumps(jobs, protocol=pickle.HIGHEST_PROTOCOL), capture_output=True,
                              timeout=timeout, check=False)
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise ModelProcessError(f"the model process exited with status {proc.returncode}: {' | '.join(tail)}")
        results = pickle.loads(proc.stdout)  # noqa: S301 - written by the child this function started
        if len(results) != len(jobs):
            raise ModelProcessError(f"the model process returned {len(results)} results for {len(jobs)} fits")
        return results
    except subprocess.TimeoutExpired:
        error = f"the model process ran past ANNOTATION_MODELS_TIMEOUT ({timeout:g} s)"
    except (ModelProcessError, OSError, pickle.UnpicklingError, EOFError) as exc:
        error = str(exc) or type(exc).__name__
    log.error("model-based aggregation failed: %s", error)
    return [{"error": error} for _ in jobs]


def _crowd_frame(parts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """crowd-kit input (worker, task, label) with task = an integer key per (task, part)."""
    keys = parts[["task", "part"]].drop_duplicates().reset_index(drop=True)
    keys["key"] = np.arange(len(keys))
    merged = parts.merge(keys, on=["task", "part"], how="left")
    data = pd.DataFrame({"worker": merged["worker"].to_numpy(), "task": merged["key"].to_numpy(),
                         "label": merged["cat"].to_numpy()})
    return data, keys


class Categorical:
    """Dawid-Skene, GLAD and MACE on one dimension: ``job()`` is the fit to run (None when the
    data cannot support one), ``emit(results, fitted)`` adds the rows. ``majority``: {(task,
    part): (label, confidence)} of the per-task pass, used where a method cannot run."""

    def __init__(self, parts: pd.DataFrame, dim: str, majority: dict):
        self.dim = dim
        self.data, self.keys = _crowd_frame(parts)
        self.index = self.keys["key"].to_numpy()
        self.tasks, self.part_names = self.keys["task"].to_numpy(), self.keys["part"].to_numpy()
        self.n_votes = self.data.groupby("task").size().reindex(self.index).to_numpy()
        known = [majority.get((int(t), p), (None, None)) for t, p in zip(self.tasks, self.part_names)]
        self.mv_label = pd.Series([k[0] for k in known], index=self.index, dtype=object)
        self.mv_conf = pd.Series([k[1] for k in known], index=self.index, dtype=object)
        self.degenerate = ("only one worker" if self.data["worker"].nunique() < 2 else
                           "only one label was given" if self.data["label"].nunique() < 2 else None)
        self.slow = len(self.data) <= _slow_limit()

    def job(self) -> tuple[str, dict] | None:
        if self.degenerate:
            return None
        # EM on large sets oscillates around 1e-4 of the (per-item) loss instead of meeting the
        # tolerance; 40 rounds give the same labels within a fraction of a percent at 100k votes
        # in a quarter of the time.
        return "categorical", {"data": self.data, "ds_iterations": 100 if self.slow else 40, "slow": self.slow}

    def _emit(self, results, method, labels, confidences, details=None):
        labels = labels.reindex(self.index).to_numpy()
        confidences = confidences.reindex(self.index).to_numpy()
        for i in range(len(self.index)):
            results.add(self.tasks[i], self.part_names[i], method, labels[i], confidences[i], self.n_votes[i],
                        details[i] if details is not None else None)

    def _fallback(self, results, method: str, reason: str):
        results.note(f"{method} ({self.dim}): {reason}; majority vote used instead")
        self._emit(results, method, self.mv_label, self.mv_conf,
                   [{"fallback": "majority", "reason": reason}] * len(self.index))

    def emit(self, results: Results, fitted: dict | None) -> dict:
        """Returns {"consensus": Series by key, "reliability": {worker: float}, "keys": DataFrame}."""
        consensus, reliability = self.mv_label, {}
        if self.degenerate:
            self._fallback(results, "dawid_skene", self.degenerate)
            results.note(f"glad, mace ({self.dim}): skipped, {self.degenerate}")
            return {"consensus": consensus, "keys": self.keys, "reliability": reliability}
        ds = fitted.get("dawid_skene") or fitted
        if "error" in ds:
            log.error("Dawid-Skene failed (%s): %s\n%s", self.dim, ds["error"], ds.get("trace", ""))
            self._fallback(results, "dawid_skene", f"failed: {ds['error']}")
        else:
            self._emit(results, "dawid_skene", ds["label"], ds["confidence"])
            consensus, reliability = ds["label"], ds["reliability"]
        if not self.slow:
            results.note(f"glad, mace ({self.dim}): skipped, {len(self.data)} votes is over the limit of "
                         f"{_slow_limit()}")
        for method in ("glad", "mace") if self.slow else ():
            out = fitted.get(method) or {"error": fitted.get("error", "no result")}
            if "error" in out:
                log.error("%s failed (%s): %s\n%s", method, self.dim, out["error"], out.get("trace", ""))
                results.note(f"{method} ({self.dim}): failed: {out['error']}")
            else:
                self._emit(results, method, out["label"], out["confidence"])
        return {"consensus": consensus, "keys": self.keys, "reliability": reliability}


class BradleyTerry:
    """Bradley-Terry on one dimension from the pairs each vote implies: of two candidates one
    worker rated together, the higher rating wins; equal ratings give no comparison."""

    def __init__(self, dim: str, group: pd.DataFrame):
        self.dim = dim
        g = group.assign(item=group["task"].astype(str) + "|" + group["part"],
                         x=group["label"].astype(float))[["vote", "worker", "item", "x", "task", "part"]]
        pairs = g.merge(g, on="vote", suffixes=("_l", "_r"))
        pairs = pairs[(pairs["item_l"] < pairs["item_r"]) & (pairs["x_l"] != pairs["x_r"])]
        self.items = g[["item", "task", "part"]].drop_duplicates("item").set_index("item")
        self.data = pd.DataFrame({
            "worker": pairs["worker_l"].to_numpy(), "left": pairs["item_l"].to_numpy(),
            "right": pairs["item_r"].to_numpy(),
            "label": np.where(pairs["x_l"] > pairs["x_r"], pairs["item_l"], pairs["item_r"])})

    def job(self) -> tuple[str, dict] | None:
        return None if self.data.empty else ("bradley_terry", {"data": self.data})

    def emit(self, results: Results, fitted: dict | None) -> None:
        if fitted is None:
            results.note(f"bradley_terry ({self.dim}): no comparisons (every pair tied)")
            return
        if "error" in fitted:
            log.error("Bradley-Terry failed (%s): %s\n%s", self.dim, fitted["error"], fitted.get("trace", ""))
            results.note(f"bradley_terry ({self.dim}): failed: {fitted['error']}")
            return
        scores = fitted["scores"]
        compared = pd.concat([self.data["left"], self.data["right"]]).value_counts()
        items = self.items[self.items.index.isin(scores.index)].copy()
        items["score"] = scores.reindex(items.index).astype(float)
        items["rank"] = items.groupby("task")["score"].rank(ascending=False, method="min")
        for item, row in items.iterrows():
            results.add(row["task"], row["part"], "bradley_terry", round(float(row["score"]), 6), None,
                        compared.get(item, 0), {"rank": int(row["rank"])})


class Rover:
    """ROVER's word-level consensus over the written captions of each image (crowd-kit), fitted in
    the model process. ``emit`` settles the ``rover`` rows the per-task pass wrote (the
    representative caption, pending): ROVER's text where it has one, else the representative
    caption stays, no longer pending."""

    def __init__(self, votes: pd.DataFrame):
        self.frame = text_frame(votes)

    def job(self) -> tuple[str, dict] | None:
        return None if self.frame.empty else ("rover", {"data": self.frame[["worker", "task", "text"]]})

    def emit(self, results: Results, fitted: dict | None) -> None:
        rover: dict = {}
        if fitted is not None and "error" in fitted:
            log.error("ROVER failed: %s\n%s", fitted["error"], fitted.get("trace", ""))
            results.note(f"rover: failed ({fitted['error']}); the representative caption is used instead")
        elif fitted is not None:
            rover = fitted["texts"]
        for (task, part, method), (label, confidence, n, details) in list(results.rows.items()):
            if method != "rover":
                continue
            details = {k: v for k, v in details.items() if k != "rover"}
            if rover.get(task):
                label = rover[task]
                details.pop("fallback", None)
            results.add(task, part, method, label, confidence, n, details)


def run_fits(models: list, results: Results) -> list:
    """Fit every model's job in one ``fit`` call and emit their rows; returns each ``emit``'s value."""
    jobs = [m.job() for m in models]
    fitted = iter(fit([j for j in jobs if j is not None]))
    return [m.emit(results, next(fitted) if j is not None else None) for m, j in zip(models, jobs)]


__all__ = ["MODEL_METHODS", "Categorical", "BradleyTerry", "Rover", "ModelProcessError", "ds_reliability", "fit",
           "run_fits"]
