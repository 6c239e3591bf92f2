"""Campaign figures as sums over tasks, so that a pass over the changed tasks can update them.

Every figure the per-task rules feed (the vote distribution, the label distributions of the
per-task methods, the seed figures, the number of ties) is a sum of one contribution per task,
computed from that task's stored aggregate rows alone. An incremental pass subtracts the old
rows' contribution and adds the new rows'; a full pass sums them all. Both then turn the tally
into the same ``Campaign.stats`` keys (``figures``)."""
from __future__ import annotations

import math
from collections import Counter

from .frames import dimension_of, label_key
from .per_task import PER_TASK_METHODS

SEP = "\x1f"  # keys: "<section>\x1f<name>..." (no label or part contains a unit separator)


def contributions(kind, rows: dict) -> Counter:
    """The tally of a set of aggregate rows {(task, part, method): (label, confidence, n, details)}
    holding every per-task row of the tasks it covers."""
    out: Counter = Counter()
    tasks = set()
    for (task, part, method), (label, _conf, n, details) in rows.items():
        if method not in PER_TASK_METHODS:
            continue
        tasks.add(task)
        details = details or {}
        if method == "rover":
            out[f"votes{SEP}written"] += n
            continue
        shown = round(label) if (method == "mean" and label is not None and not kind.scored) \
            else label
        out[f"label{SEP}{method}{SEP}{label_key(kind, part, shown)}"] += 1
        if method == "majority":
            votes = details.get("votes") or {}
            if not kind.scored:
                for value, count in votes.items():
                    out[f"votes{SEP}{label_key(kind, part, value)}"] += count
            if details.get("tie"):
                out[f"ties{SEP}majority"] += 1
            if kind.name == "quality":
                good = votes.get("good", 0)
                out[f"good{SEP}items"] += 1
                for k in (1, 2, 3):
                    out[f"good{SEP}{k}+"] += int(good >= k)
        elif method == "mean":
            dim = dimension_of(kind, part)
            out[f"likert{SEP}{dim}{SEP}n"] += n
            out[f"likert{SEP}{dim}{SEP}sum"] += details.get("sum", 0.0)
            out[f"likert{SEP}{dim}{SEP}sumsq"] += details.get("sumsq", 0.0)
            for key, count in (details.get("buckets") or {}).items():
                out[f"votes{SEP}{key}"] += count
        elif method == "consistent":
            name = label if label in ("fluent", "not_fluent") else "ignored"
            out[f"fluency{SEP}{name}"] += 1
    out["tasks"] += len(tasks)
    return out


def apply(tally: dict, minus: Counter, plus: Counter) -> dict:
    """tally - minus + plus, dropping zero counts (floats near zero included)."""
    result = Counter({k: v for k, v in tally.items()})
    for k, v in minus.items():
        result[k] -= v
    for k, v in plus.items():
        result[k] += v
    return {k: v for k, v in result.items() if not (abs(v) < 1e-9)}


def figures(kind, tally: dict, tie_rule: str) -> dict:
    """The ``Campaign.stats`` keys a tally gives."""
    votes, labels, likert = {}, {}, {}
    fluency = {"fluent": 0, "not_fluent": 0, "ignored": 0}
    good = {"items": 0, "1+": 0, "2+": 0, "3+": 0}
    for key, value in tally.items():
        section, *rest = key.split(SEP)
        if section == "votes":
            votes[rest[0]] = int(value)
        elif section == "label":
            labels.setdefault(rest[0], {})[rest[1]] = int(value)
        elif section == "fluency":
            fluency[rest[0]] = int(value)
        elif section == "good":
            good[rest[0]] = int(value)
        elif section == "likert":
            likert.setdefault(rest[0], {})[rest[1]] = value
    seed: dict = {}
    if kind.name == "fluency":
        seed["fluency_consistent"] = fluency
    if kind.name == "quality":
        n = good["items"]
        seed["good_shares"] = {k: (round(good[k] / n, 4) if n else None) for k in ("1+", "2+", "3+")}
    if likert:
        seed["likert"] = {}
        for dim, s in sorted(likert.items()):
            n = int(round(s.get("n", 0)))
            if n <= 0:
                continue
            mean = s.get("sum", 0.0) / n
            var = max(s.get("sumsq", 0.0) / n - mean * mean, 0.0)
            seed["likert"][dim] = {"mean": round(mean, 4), "std": round(math.sqrt(var), 4), "n": n}
    if kind.written and not votes.get("written"):
        votes = {}
    return {
        "vote_distribution": dict(sorted(votes.items())),
        "label_distribution": {m: dict(sorted(d.items())) for m, d in sorted(labels.items())},
        "seed_figures": seed,
        "n_tasks_aggregated": int(tally.get("tasks", 0)),
        "ties": {"rule": tie_rule, "majority": int(tally.get(f"ties{SEP}majority", 0))},
    }
