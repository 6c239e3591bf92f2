"""k-fold cross-validation of a binary classifier after its run, for small data sets, where one held-out
split is too few items to tell a model from the majority class.

The trainer opts in by implementing ``folds``, ``labels`` and ``predict_proba`` (see Trainer); the run's
config asks for it with ``cv_folds`` >= 2, and it runs only below ``cv_below`` labelled items. Each fold
is trained by ``fit_in_memory`` (the run's loop and config) and scored against the majority class of its
own training items.
"""
from __future__ import annotations

from .. import evaluation, verdicts
from ..trainers.base import Prepared, Trainer
from .fit import fit_in_memory
from .progress import Cancelled


def split_labels(trainer: Trainer, split) -> list[int]:
    """The 0/1 labels of a split; [] for a missing or empty one (a fold's val may be empty)."""
    if split is None:
        return []
    try:
        if len(split) == 0:
            return []
    except TypeError:
        pass
    return [int(y) for y in trainer.labels(split)]


def labelled_count(trainer: Trainer, prepared: Prepared) -> int:
    return sum(len(split_labels(trainer, s)) for s in (prepared.train, prepared.val, prepared.test))


def folds_wanted(trainer: Trainer, prepared: Prepared, config: dict) -> int:
    """k when this run is cross-validated, else 0: the trainer can split folds, cv_folds >= 2, and the
    data set has fewer than cv_below labelled items."""
    k = int(config.get("cv_folds", 0) or 0)
    if k < 2 or not all(callable(getattr(trainer, name, None)) for name in ("folds", "labels", "predict_proba")):
        return 0
    return k if labelled_count(trainer, prepared) < int(config.get("cv_below", 500)) else 0


def cross_validate(trainer: Trainer, prepared: Prepared, config: dict, device, progress) -> dict:
    """{"folds": k, "model": summarise(fold reports), "majority": summarise(majority reports),
    "confusion": the folds' confusion matrices summed, "items": every fold's items with the model's and the
    baselines' predictions (modeling.verdicts.fold_items; the engine pools them into the verdict and drops
    them)}. Logs one line per fold; raises _Cancelled when the run is cancelled between folds."""
    k = int(config["cv_folds"])
    folds = trainer.folds(prepared, k, int(config.get("seed", 0)))
    progress.log(f"Cross-validation: {len(folds)} folds over {labelled_count(trainer, prepared)} labelled items.")
    models, majorities, items = [], [], []
    for number, fold in enumerate(folds, 1):
        report, majority, scored = _score_fold(trainer, fold, config, device)
        models.append(report)
        majorities.append(majority)
        items.append(scored)
        progress.log(f"Fold {number}/{len(folds)}: macro F1 {report['macro_f1']:.3f}, majority class "
                     f"{majority['macro_f1']:.3f} ({report['n']} held-out items).")
        if not progress.flush(force=True):
            raise Cancelled()
    return {"folds": len(folds), "model": evaluation.summarise(models), "majority": evaluation.summarise(majorities),
            "confusion": _summed_confusion(models), "items": items}


def _score_fold(trainer, fold: Prepared, config, device) -> tuple[dict, dict, dict]:
    model = fit_in_memory(trainer, fold, config, device)
    y_true = split_labels(trainer, fold.test)
    probs = list(trainer.predict_proba(model, fold.test, device)) if y_true else []
    seen = split_labels(trainer, fold.train) + split_labels(trainer, fold.val)
    threshold = float(config.get("threshold", 0.5))
    return (evaluation.binary_report(y_true, probs, threshold), evaluation.majority_baseline(seen, y_true),
            verdicts.fold_items(trainer, fold, y_true, probs, threshold))


def _summed_confusion(reports: list[dict]) -> dict:
    keys = ("tp", "fp", "fn", "tn")
    return {key: sum(int(r["confusion"][key]) for r in reports) for key in keys}
