"""Seed 004's baselines for the fluency classifier (Table 2): a random guess and a sentence-length
rule, scored on the same held-out items as the model. The majority class and the full report live in
modeling.evaluation."""
from __future__ import annotations


def binary_metrics(y_true: list[int], y_pred: list[int]) -> dict:
    tp = sum(1 for t, p in zip(y_true, y_pred) if t == 1 and p == 1)
    fp = sum(1 for t, p in zip(y_true, y_pred) if t == 0 and p == 1)
    fn = sum(1 for t, p in zip(y_true, y_pred) if t == 1 and p == 0)
    n = len(y_true)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = sum(1 for t, p in zip(y_true, y_pred) if t == p) / n if n else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "accuracy": round(accuracy, 4)}


def length_baseline(train_lengths: list[int], train_labels: list[int], test_lengths: list[int],
                    test_labels: list[int]) -> dict:
    """Seed 004, Table 2: fluent if the sentence is shorter than the mean length of the fluent
    sentences of the training split."""
    fluent = [n for n, y in zip(train_lengths, train_labels) if y == 1]
    threshold = sum(fluent) / len(fluent) if fluent else 0.0
    preds = [1 if n < threshold else 0 for n in test_lengths]
    return {**binary_metrics(test_labels, preds), "threshold": round(threshold, 4)}


def random_guess(test_labels: list[int]) -> dict:
    """Seed 004, Table 2: a fair coin per sentence, as expected values (recall 1/2, precision the
    share of fluent sentences, accuracy 1/2)."""
    n = len(test_labels)
    share = sum(test_labels) / n if n else 0.0
    precision, recall = share, 0.5 if share else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "accuracy": 0.5 if n else 0.0}

