"""The per-task rules: each task's result depends on that task's votes only, so a pass can
recompute just the tasks whose votes changed (see ``incremental``).

- ``majority``: the most frequent label (a slider's good/bad side), its share as the confidence.
  A tie is reported as a tie (``details["tie"]``, the tied labels in ``details["tied"]``) and its
  label follows the campaign's tie-break rule, ``provider_config["tie_break"]``:

  - ``"report"`` (the default): no label (null); the item counts as tied, never silently won;
  - ``"prefer:<label>"``: that label when it is one of the tied ones (e.g. ``prefer:bad`` for a
    conservative filter), else reported as a tie;
  - ``"random"``: one of the tied labels, drawn reproducibly from the task and part.
- ``mean``: mean and population standard deviation of numeric labels (sliders, 1-5 ratings);
- ``consistent``: the rule of seed 004 (fluent / not fluent only when all votes agree and none
  says "difficult");
- ``rover``: the written caption of highest mean token similarity to the others of its image (the
  representative one); ROVER's word-level consensus replaces it in the model pass, which fits
  crowd-kit's ROVER in the model process (``methods.Rover``) so that the worker never imports it.
"""
from __future__ import annotations

import hashlib
import logging

import pandas as pd

from .frames import Results, explode_parts, py

log = logging.getLogger(__name__)

PER_TASK_METHODS = ("majority", "mean", "consistent", "rover")
TIE_RULES = ("report", "random", "prefer:<label>")


def validate_tie_break(value) -> str:
    """The tie-break rule as stored, or ValueError with a message a curator can act on."""
    if value in (None, ""):
        return "report"
    if not isinstance(value, str):
        raise ValueError("tie_break must be a string: report, random or prefer:<label>")
    if value in ("report", "random"):
        return value
    if value.startswith("prefer:") and value[len("prefer:"):].strip():
        return value
    raise ValueError(f"tie_break {value!r} is not a rule: use report, random or prefer:<label>")


def tie_break_rule(campaign) -> tuple[str, str | None]:
    """(rule, note): the campaign's rule; an invalid stored one falls back to "report" with a note."""
    try:
        return validate_tie_break((campaign.provider_config or {}).get("tie_break")), None
    except ValueError as exc:
        return "report", f"{exc}; ties are reported"


def _break(rule: str, tied: list, task: int, part: str):
    if rule == "random":
        digest = hashlib.sha256(f"{task}|{part}".encode()).digest()
        return tied[int.from_bytes(digest[:4], "big") % len(tied)]
    if rule.startswith("prefer:"):
        wanted = rule[len("prefer:"):]
        for label in tied:
            if str(label) == wanted:
                return label
    return None


def majority(parts: pd.DataFrame, results: Results, rule: str = "report") -> None:
    """Majority vote per (task, part) with ties reported (see the module docstring)."""
    if parts.empty:
        return
    counts = parts.groupby(["task", "part", "cat"], sort=True).size()
    current, items = None, []

    def flush():
        task, part = current
        total = sum(n for _, n in items)
        top = max(n for _, n in items)
        tied = [label for label, n in items if n == top]
        details = {"votes": {str(py(label)): int(n) for label, n in items}, "tie": len(tied) > 1}
        if len(tied) > 1:
            details["tied"] = [py(label) for label in tied]
            details["tie_break"] = rule
            label = _break(rule, tied, task, part)
        else:
            label = tied[0]
        results.add(task, part, "majority", label, top / total, total, details)

    for (task, part, cat), n in counts.items():
        if (task, part) != current:
            if current is not None:
                flush()
            current, items = (task, part), []
        items.append((cat, int(n)))
    flush()


def means(kind, parts: pd.DataFrame, results: Results) -> None:
    """Mean and population standard deviation per task and part ("mean" method); the details keep
    the exact sum and sum of squares (and a slider's scores in tens) for the campaign figures."""
    if parts.empty:
        return
    values = parts.assign(x=parts["label"].astype(float))
    values = values.assign(x2=values["x"] ** 2)
    grouped = values.groupby(["task", "part"]).agg(mean=("x", "mean"), size=("x", "size"), min=("x", "min"),
                                                   max=("x", "max"), sum=("x", "sum"), sumsq=("x2", "sum"))
    grouped["std0"] = values.groupby(["task", "part"])["x"].std(ddof=0)
    buckets = {}
    if kind.scored:
        from .frames import bucket

        for (task, part), x in values.groupby(["task", "part"])["x"]:
            counter: dict[str, int] = {}
            for v in x:
                counter[bucket(v)] = counter.get(bucket(v), 0) + 1
            buckets[(task, part)] = counter
    for (task, part), row in grouped.iterrows():
        details = {"std": round(float(row["std0"]), 4), "min": py(row["min"]), "max": py(row["max"]),
                   "sum": float(row["sum"]), "sumsq": float(row["sumsq"])}
        if buckets:
            details["buckets"] = buckets[(task, part)]
        results.add(task, part, "mean", round(float(row["mean"]), 4), None, row["size"], details)


def fluency_consistent(parts: pd.DataFrame, results: Results, min_votes: int) -> None:
    """Seed 004: a sentence is fluent / not fluent only when all its votes agree and none says
    "difficult"; otherwise it is ignored (label null). A sentence with fewer than ``min_votes``
    votes (2, or 1 in a one-vote campaign) has nothing to be consistent with and is ignored too."""
    if parts.empty:
        return
    grouped = parts.assign(difficult=parts["cat"] == "difficult").groupby(["task", "part"]).agg(
        n=("cat", "size"), distinct=("cat", "nunique"), first=("cat", "first"), difficult=("difficult", "any"))
    for (task, part), n, distinct, first, difficult in grouped[["n", "distinct", "first", "difficult"]].itertuples(
            name=None):
        if n >= min_votes and distinct == 1 and not difficult:
            results.add(task, part, "consistent", first, 1.0, n)
        else:
            reason = "too few votes" if n < min_votes else ("difficult" if difficult else "disagree")
            results.add(task, part, "consistent", None, None, n, {"ignored": reason})


def _similarity(a: str, b: str) -> float:
    """Token-set Jaccard similarity (case-insensitive): cheap and embedding-free."""
    sa, sb = set(a.lower().split()), set(b.lower().split())
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def text_frame(votes: pd.DataFrame) -> pd.DataFrame:
    """The written captions of ``votes``: one row per vote with text (vote, task, worker, caption, text)."""
    rows = [(v, t, w, c, (val or {}).get("text")) for v, t, w, c, val in
            votes[["vote", "task", "worker", "caption", "value"]].itertuples(index=False, name=None)]
    return pd.DataFrame(rows, columns=["vote", "task", "worker", "caption", "text"]).dropna(subset=["text"])


def texts(votes: pd.DataFrame, results: Results) -> None:
    """The ``rover`` row of each image, as the per-task pass can make it: the representative caption
    (the written caption with the highest mean similarity to the others of its image), also kept in
    the details, marked ``details["rover"] == "pending"``. ROVER needs crowd-kit: the model pass
    fits it in the model process and puts its text in these rows (``methods.Rover``)."""
    frame = text_frame(votes)
    for task, group in frame.groupby("task"):
        items = list(group[["vote", "caption", "text"]].itertuples(index=False, name=None))
        best, best_sim = items[0], -1.0
        for item in items:
            others = [_similarity(item[2], o[2]) for o in items if o is not item]
            mean_sim = sum(others) / len(others) if others else 1.0
            if mean_sim > best_sim:
                best, best_sim = item, mean_sim
        details = {"representative": {"vote": int(best[0]), "caption": py(best[1]), "text": best[2],
                                      "similarity": round(best_sim, 4)},
                   "fallback": "representative", "rover": "pending"}
        results.add(task, "", "rover", best[2], best_sim, len(items), details)


def per_task_rows(campaign, kind, votes: pd.DataFrame, results: Results, rule: str = "report"):
    """Run the per-task rules on ``votes`` (a load_votes frame); returns the exploded parts of all
    the votes (blocked ones included, for the per-worker figures), or None for written captions."""
    used = votes[~votes["blocked"]]
    if kind.written:
        texts(used, results)
        return None
    all_parts = explode_parts(kind, votes)
    parts = all_parts[~all_parts["blocked"]]
    majority(parts, results, rule)
    if kind.numeric:
        means(kind, parts, results)
    if kind.name == "fluency":
        fluency_consistent(parts, results, 1 if campaign.votes_per_item <= 1 else 2)
    return all_parts
