"""What every fluency trainer shares: the labelled items of a fluency campaign, the checks on their
counts, the stratified splits and folds, and the held-out evaluation next to the baselines.

Labels (seed 004): a task's "consistent" aggregate (annotation.aggregation: both raters agree and
neither said "difficult to tell") is ``fluent`` (y = 1) or ``not_fluent`` (y = 0); tasks whose
consistent label is null are left out and counted by reason. A campaign never aggregated is aggregated
first. ``exclude_tasks`` in the config keeps tasks out of training (a learning loop's hold-out).
"""
from __future__ import annotations

import random
from collections import Counter

from modeling.evaluation import binary_report, majority_baseline

from .base import Prepared, TrainingError
from .fluency_baselines import length_baseline, random_guess
from .fluency_text import words

# Below this many consistent labels the seed's 512-d LSTM rarely learns more than the majority class.
SMALL_DATA_LABELS = 500


def labelled_items(campaign, exclude_tasks=()) -> tuple[list[dict], dict]:
    """The campaign's consistently labelled items [{task, caption, text, source, label, language,
    source_language}] in task order, and the counts left out by reason."""
    from annotation.models import Aggregate, Task

    if campaign.kind != "fluency":
        raise TrainingError(f"Campaign {campaign.name!r} is a {campaign.kind!r} campaign; the fluency "
                            f"classifier trains on a fluency campaign's votes.", code="bad_config")
    rows = Aggregate.objects.filter(task__campaign=campaign, task__role=Task.Role.REAL, method="consistent",
                                    part="")
    if not rows.exists():
        from annotation.aggregation import aggregate_campaign

        aggregate_campaign(campaign.pk)
    excluded = {int(t) for t in exclude_tasks or ()}
    items, left_out = [], Counter()
    for agg in rows.select_related("task__caption__parent").order_by("task_id"):
        if agg.task_id in excluded:
            left_out["hold-out"] += 1
            continue
        caption = agg.task.caption
        if caption is None:
            left_out["no caption"] += 1
            continue
        if agg.label not in ("fluent", "not_fluent"):
            left_out[(agg.details or {}).get("ignored") or "no consistent label"] += 1
            continue
        items.append(_item(agg, caption, campaign))
    return items, dict(left_out)


def _item(agg, caption, campaign) -> dict:
    meta = caption.metadata or {}
    source = meta.get("source_text") if isinstance(meta.get("source_text"), str) else None
    source_language = meta.get("source_language") or ""
    if not source and caption.parent_id:
        source = caption.parent.text
        source_language = source_language or caption.parent.language
    return {"task": agg.task_id, "caption": caption.pk, "text": caption.text, "source": source or "",
            "label": 1 if agg.label == "fluent" else 0,
            "language": caption.language or campaign.text_language or "en",
            "source_language": source_language or "en"}


def check_counts(items: list[dict], left_out: dict, config: dict) -> None:
    fluent = sum(i["label"] for i in items)
    not_fluent = len(items) - fluent
    need, per_class = int(config["min_labels"]), int(config["min_per_class"])
    if len(items) < need or fluent < per_class or not_fluent < per_class:
        ignored = sum(v for k, v in left_out.items() if k != "hold-out")
        held = left_out.get("hold-out", 0)
        raise TrainingError(
            f"Too few fluency labels to train: need at least {need} consistent labels with at least "
            f"{per_class} of each class; present: {len(items)} ({fluent} fluent, {not_fluent} not fluent; "
            f"{ignored} left out as difficult, inconsistent or with too few votes"
            f"{f'; {held} kept out as the hold-out' if held else ''}).",
            code="too_few_labels")


def split(items: list[dict], config: dict) -> tuple[list, list, list]:
    """Stratified, seeded: each class split on its own so every split sees both classes."""
    rng = random.Random(f"fluency-split:{config.get('seed', 0)}")
    train, val, test = [], [], []
    for label in (1, 0):
        group = [i for i in items if i["label"] == label]
        rng.shuffle(group)
        n_test = max(1, round(len(group) * float(config["test_fraction"])))
        n_val = round(len(group) * float(config["val_fraction"]))
        if len(group) - n_test - n_val < 1:
            n_val = max(0, len(group) - n_test - 1)
        test += group[:n_test]
        val += group[n_test:n_test + n_val]
        train += group[n_test + n_val:]
    for part in (train, val, test):
        part.sort(key=lambda i: i["task"])
    return train, val, test


def stratified_folds(examples: list, label_of, k: int, seed: int) -> list[list[int]]:
    """Indices of ``examples`` dealt into k folds class by class after a seeded shuffle, so each fold
    holds about 1/k of each class."""
    rng = random.Random(f"fluency-folds:{seed}")
    folds: list[list[int]] = [[] for _ in range(k)]
    dealt = 0
    for label in (1, 0):
        group = [n for n, e in enumerate(examples) if label_of(e) == label]
        rng.shuffle(group)
        for n in group:
            folds[dealt % k].append(n)
            dealt += 1
    return [sorted(f) for f in folds]


def inner_split(indices: list[int], labels: list[int], val_fraction: float, seed: int) -> tuple[list, list]:
    """A stratified validation share of a fold's training indices (for early stopping)."""
    rng = random.Random(f"fluency-inner:{seed}")
    train, val = [], []
    for label in (1, 0):
        group = [n for n in indices if labels[n] == label]
        rng.shuffle(group)
        n_val = round(len(group) * val_fraction) if len(group) > 2 else 0
        val += group[:n_val]
        train += group[n_val:]
    return sorted(train), sorted(val)


def counts(part: list[dict]) -> dict:
    fluent = sum(i["label"] for i in part)
    return {"fluent": fluent, "not_fluent": len(part) - fluent}


def small_data_note(n_labels: int, trainer_name: str) -> str | None:
    if n_labels >= SMALL_DATA_LABELS or trainer_name != "fluency-lstm4":
        return None
    return (f"Only {n_labels} labels: the seed's four 512-d LSTMs were trained on tens of thousands of rated "
            f"sentences and often learn no more than the majority class from a few hundred. The "
            f"'fluency-encoder' trainer (a head on a pretrained sentence encoder) is meant for this size; the "
            f"cross-validated verdict below says whether this run learned anything.")


def held_out_metrics(y: list[int], probs: list[float], threshold: float, train_labels: list[int],
                     train_lengths: list[int], test_lengths: list[int]) -> dict:
    """The report on the test split with the majority class, seed 004's random guess and length rule
    beside it. The flat keys precision/recall/f1/accuracy are the fluent class's (as seed 004 reports)."""
    report = binary_report(y, probs, threshold)
    baselines = {"majority": majority_baseline(train_labels, y), "random_guess": random_guess(y),
                 "length_rated": length_baseline(train_lengths, train_labels, test_lengths, y)}
    return {"precision": report["precision"], "recall": report["recall"], "f1": report["f1"],
            "accuracy": report["accuracy"], "macro_f1": report["macro_f1"], "ece": report["ece"],
            "n_test": len(y), "threshold": threshold, "report": report, "baselines": baselines}


def n_words(text: str) -> int:
    return len(words(text))


def fold_prepared(prepared: Prepared, combine, select, k: int, seed: int, val_fraction: float,
                  label_of) -> list[Prepared]:
    """k Prepared objects over all of ``prepared``'s items: ``combine(prepared)`` gives the items as one
    list, ``select(items, indices)`` a split of them; each fold is a test split, the rest is training
    with a stratified validation share."""
    everything = combine(prepared)
    labels = [label_of(e) for e in everything]
    out = []
    for n, test_idx in enumerate(stratified_folds(everything, label_of, k, seed)):
        held = set(test_idx)
        rest = [i for i in range(len(everything)) if i not in held]
        train_idx, val_idx = inner_split(rest, labels, val_fraction, seed + n)
        out.append(Prepared(train=select(everything, train_idx), val=select(everything, val_idx),
                            test=select(everything, test_idx), info=prepared.info, data_hash=prepared.data_hash,
                            summary={"fold": n + 1, "of": k}))
    return out
