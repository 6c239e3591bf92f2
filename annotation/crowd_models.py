"""The model-based aggregation methods' fits (crowd-kit: Dawid-Skene, GLAD, MACE and ROVER over
written captions; Bradley-Terry by ``annotation.bradley_terry``),
kept free of Django so that they can run in a process of their own.

Importing crowd-kit brings scipy, scikit-learn, nltk and pandas' optional pyarrow with it: about
100 MiB and 1.3 s of CPU. The model-based methods run at most every few minutes per campaign
(``annotation.aggregation.incremental.models_wait``), so the worker does not keep those libraries:
``annotation.aggregation.methods.fit`` sends the prepared frames to ``python -m
annotation.crowd_models`` (pickled on stdin, results pickled on stdout) and the memory leaves with
that process. ``ANNOTATION_MODELS_PROCESS = "inline"`` fits in the calling process instead.

A fit that fails returns ``{"error": ...}`` for its method and the others still run: the caller
reports the failure and falls back to majority vote where it has to.
"""
from __future__ import annotations

import pickle
import sys
import traceback
import warnings

import numpy as np
import pandas as pd


def best(probas: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Most probable label per row and its probability."""
    values = probas.to_numpy(dtype=float)
    return (pd.Series(probas.columns.to_numpy()[values.argmax(axis=1)], index=probas.index),
            pd.Series(values.max(axis=1), index=probas.index))


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


def _failed(exc: BaseException) -> dict:
    return {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}


def fit_categorical(data: pd.DataFrame, ds_iterations: int, slow: bool) -> dict:
    """Dawid-Skene on (worker, task, label) rows, and GLAD and MACE when ``slow``:
    {method: {"label": Series, "confidence": Series[, "reliability": {worker: float}]} or
    {"error": text}}."""
    from crowdkit.aggregation import GLAD, MACE, DawidSkene

    out: dict = {}
    models = [("dawid_skene", lambda: DawidSkene(n_iter=ds_iterations, tol=1e-5))]
    if slow:
        models += [("glad", lambda: GLAD(n_iter=20)), ("mace", lambda: MACE(n_iter=20, n_restarts=2, random_state=0))]
    for method, model in models:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                fitted = model()
                probas = fitted.fit(data).probas_ if method == "dawid_skene" else fitted.fit_predict_proba(data)
            label, confidence = best(probas)
            out[method] = {"label": label, "confidence": confidence}
            if method == "dawid_skene":
                out[method]["reliability"] = ds_reliability(fitted.errors_, fitted.priors_)
        except Exception as exc:  # noqa: BLE001 - a numerical failure must not lose the other methods
            out[method] = _failed(exc)
    return out


def fit_bradley_terry(data: pd.DataFrame) -> dict:
    """Bradley-Terry on (worker, left, right, label) comparisons (``annotation.bradley_terry``, the
    maximum-likelihood strengths): {"scores": Series} or {"error": text}."""
    from .bradley_terry import fit

    try:
        scores = fit(data[["left", "right", "label"]].itertuples(index=False, name=None))
        return {"scores": pd.Series(scores, dtype=float)}
    except Exception as exc:  # noqa: BLE001
        return _failed(exc)


def _words(text: str) -> list[str]:
    return text.split()


def fit_rover(data: pd.DataFrame) -> dict:
    """ROVER word-level consensus over (worker, task, text) rows: {"texts": {task: text}} or {"error": text}."""
    from crowdkit.aggregation import ROVER

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"texts": ROVER(tokenizer=_words, detokenizer=" ".join).fit_predict(data).to_dict()}
    except Exception as exc:  # noqa: BLE001
        return _failed(exc)


FITS = {"categorical": fit_categorical, "bradley_terry": fit_bradley_terry, "rover": fit_rover}


def fit_all(jobs: list[tuple[str, dict]]) -> list[dict]:
    """Each job is (fit name, keyword arguments); one result per job, in order."""
    return [FITS[name](**kwargs) for name, kwargs in jobs]


def main() -> int:
    jobs = pickle.load(sys.stdin.buffer)  # noqa: S301
    results = fit_all(jobs)
    sys.stdout.buffer.write(pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
