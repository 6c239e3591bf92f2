"""What random sampling would have given: the learning curve's comparison arm.

The labels a loop collected were chosen by its sampler, so the only random samples the data allow are
random subsets of the labelled pool. For each round's training size n, ``curve`` trains the loop's
trainer (``fit_in_memory``, the same epoch loop as a run) on REPEATS random subsets of size n of the
current pool and scores them on the hold-out. At the latest round the random subsets are nearly the
whole pool (the run keeps a fifth back as its own test split), so the comparison is at the earlier sizes. Only trainers that build features once and train in seconds (the
encoder head) do this; for the seed's LSTM the page says the arm was not simulated.
"""
from __future__ import annotations

import numpy as np

from .. import verdicts
from ..evaluation import binary_report
from ..trainers import get_trainer
from ..trainers.fluency_data import labelled_items

REPEATS = 3


def curve(loop, round_, held: list[dict], echo=None) -> dict:
    from ..engine import fit_in_memory

    trainer = get_trainer(loop.trainer)
    if not hasattr(trainer, "prepared_from_features") or not trainer.fast_refit or not held:
        return {"simulated": False, "why": "the trainer is too slow to retrain per point" if held else "no hold-out"}
    items, _ = labelled_items(loop.campaign, exclude_tasks=loop.holdout_tasks or ())
    config = trainer.config(loop.config)
    language = items[0]["language"] if items else "en"
    info = (round_.version.config or {}).get("info") if getattr(round_, "version", None) else None
    if info and hasattr(trainer, "features_like"):  # as the round's version computes them (its detector, say)
        x = trainer.features_like(info, [i["text"] for i in items])
        hx = trainer.features_like(info, [i["text"] for i in held])
    else:
        x = trainer.text_features([i["text"] for i in items], encoder=config.get("encoder") or None,
                                  syntax=bool(config.get("syntax", True)), language=language)
        hx = trainer.text_features([i["text"] for i in held], encoder=config.get("encoder") or None,
                                   syntax=bool(config.get("syntax", True)), language=language)
    y = np.asarray([i["label"] for i in items])
    hy = [i["label"] for i in held]
    # The sizes the rounds trained on (this round's included), so each point pairs with a round.
    sizes = sorted({r for r in loop.rounds.filter(status="done").values_list("labels_used", flat=True) if r}
                   | ({round_.labels_used} if round_.labels_used else set()))
    points = []
    for size in sizes:
        scores, preds = [], []
        for repeat in range(REPEATS):
            pick = np.random.default_rng(loop.seed * 7919 + size * 31 + repeat).choice(len(y), min(size, len(y)),
                                                                                      replace=False)
            if len(set(y[pick].tolist())) < 2:
                continue
            prepared = trainer.prepared_from_features(x[pick], y[pick].tolist(), {**config, "seed": repeat})
            model = fit_in_memory(trainer, prepared, {**config, "seed": repeat})
            probs = trainer.predict_features(model, hx)
            scores.append(binary_report(hy, probs)["macro_f1"])
            preds.append([1 if p > 0.5 else 0 for p in probs])
        if scores:
            points.append({"labels": int(size), "macro_f1": round(float(np.mean(scores)), 4),
                           "sd": round(float(np.std(scores)), 4), "repeats": len(scores), "n": len(hy),
                           "interval": verdicts.bootstrap_interval_mean(hy, preds, seed=loop.seed + size)})
        if echo:
            echo(f"random arm: {size} labels -> {points[-1]['macro_f1'] if points else '-'}")
    return {"simulated": True, "repeats": REPEATS, "points": points}
