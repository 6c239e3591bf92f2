"""Reading a campaign's votes into frames, and the result rows every method adds to."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..models import Assignment, Campaign, Membership, Task, Vote, Worker

VOTE_COLUMNS = ["vote", "task", "worker", "value", "seconds", "caption", "blocked"]


def counted_votes(campaign: Campaign):
    """The votes aggregation counts: real votes on real tasks, not quarantined (their external
    assignment is not confirmed by the provider), not in an assignment the requester rejected."""
    return (Vote.objects.filter(campaign=campaign, role=Task.Role.REAL, task__role=Task.Role.REAL,
                                quarantined=False)
            .exclude(assignment__state=Assignment.State.REJECTED))


def blocked_workers(campaign: Campaign) -> set[int]:
    """Workers whose votes are left out: blocked in this campaign or everywhere (the second set is
    small, so it is read whole and not joined against the campaign's votes)."""
    members = set(Membership.objects.filter(campaign=campaign, blocked=True).values_list("worker_id", flat=True))
    return members | set(Worker.objects.filter(blocked=True).values_list("pk", flat=True))


def load_votes(campaign: Campaign, task_ids=None) -> pd.DataFrame:
    """One query: the campaign's counted votes (all of them, or those of ``task_ids``) with a
    ``blocked`` column for the votes of blocked workers."""
    qs = counted_votes(campaign)
    if task_ids is not None:
        qs = qs.filter(task_id__in=list(task_ids))
    rows = list(qs.order_by("pk").values_list("pk", "task_id", "worker_id", "value", "seconds", "caption_id"))
    frame = pd.DataFrame(rows, columns=VOTE_COLUMNS[:-1])
    frame["blocked"] = frame["worker"].isin(blocked_workers(campaign)).astype(bool)
    return frame


def dimension_of(kind, part: str) -> str:
    """The dimension a part belongs to: "<caption id>:<dimension>" -> dimension; "" -> the kind's."""
    if ":" in part:
        return part.split(":", 1)[1]
    return kind.label_field


def explode_parts(kind, votes: pd.DataFrame) -> pd.DataFrame:
    """One row per (vote, part): task, worker, part, dim, label (the raw value) and cat (the
    categorical label the discrete methods use: the label itself, or a slider's good/bad side)."""
    records = []
    for vote, task, worker, value, seconds, blocked in votes[
            ["vote", "task", "worker", "value", "seconds", "blocked"]].itertuples(index=False, name=None):
        for part, label in kind.parts(value).items():
            if label is not None:
                records.append((vote, task, worker, part, label, seconds, blocked))
    parts = pd.DataFrame(records, columns=["vote", "task", "worker", "part", "label", "seconds", "blocked"])
    parts["blocked"] = parts["blocked"].astype(bool)
    parts["dim"] = pd.Series([dimension_of(kind, p) for p in parts["part"]], index=parts.index, dtype=object)
    if kind.scored:
        middle = (kind.minimum + kind.maximum) / 2
        parts["cat"] = np.where(parts["label"].astype(float) >= middle, "good", "bad")
    else:
        parts["cat"] = parts["label"]
    return parts


def py(value):
    """A JSON-safe Python value from numpy/pandas scalars."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def bucket(score: float) -> str:
    low = min(int(score // 10) * 10, 90)
    return f"{low}-{low + 10 if low == 90 else low + 9}"


def label_key(kind, part: str, label) -> str:
    """The key a label is counted under in the distributions (slider scores in tens)."""
    if kind.scored and isinstance(label, (int, float)) and not isinstance(label, bool):
        return bucket(float(label))
    text = "null" if label is None else str(label)
    if kind.target == "candidates" and len(kind.dimensions) > 1:
        return f"{dimension_of(kind, part)}:{text}"
    return text


class Results:
    """Aggregate rows being built: {(task, part, method): (label, confidence, n_votes, details)}."""

    def __init__(self):
        self.rows: dict[tuple, tuple] = {}
        self.notes: list[str] = []
        self.methods: set[str] = set()

    def add(self, task, part, method, label, confidence=None, n_votes=0, details=None):
        conf = None if confidence is None else round(float(confidence), 6)
        self.rows[(int(task), part, method)] = (py(label), conf, int(n_votes), details or {})
        self.methods.add(method)

    def note(self, text: str):
        if text not in self.notes:
            self.notes.append(text)
