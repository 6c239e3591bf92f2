"""The best written caption of each image of a write campaign, chosen by people.

Write, then rate (seed 001's write-evaluate loop): each caption written in a write campaign becomes
a task of its rating campaign (``Campaign.rate_campaign``, fed by ``routing.feed_rating_campaign``).
A rating counts as a number in [0, 1]: a slider's score scaled to its range, or 1 for the kind's
first choice (GOOD, Fluent: the positive answer of every caption kind) and 0 for the others.

- ``bradley_terry`` (the default): a ranking. Two captions of one image that the same rater rated
  differently are a comparison, the higher rating winning (equal ratings compare nothing);
  Bradley-Terry (``annotation.bradley_terry``) fits a strength per caption over every comparison.
  The best caption is the strongest of its image, its confidence its share of the image's
  strengths (under Bradley-Terry, the probability that it is chosen from the image's captions). An image where some caption took
  part in no comparison (unrated, or rated the same as the others by everyone) falls back to the
  mean rating, and its row says so.
- ``mean_rating``: the caption with the highest mean rating; its confidence is that mean.
- ``rover``: crowd-kit's ROVER word-level consensus over the written captions, as the aggregation
  stores it, kept as an option: it is a new sentence nobody wrote, often not a grammatical one.

Ties (two captions with the same top figure) are flagged; the lower caption id is then shown.
"""
from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import dataclass, field

from .models import Aggregate, Assignment, Campaign, Membership, Task, Vote
from .result_votes import counted_votes

log = logging.getLogger(__name__)


@dataclass
class Best:
    caption_id: int | None
    text: str
    confidence: float | None
    method: str
    tie: bool = False
    counts: dict = field(default_factory=dict)  # {"captions": n, "ratings": n, "comparisons": n}


def written_captions(write: Campaign) -> dict[int, tuple[int, str]]:
    """{caption id: (write task id, text)} of the counted written captions."""
    return {cid: (task, text) for task, cid, text in counted_votes(write).filter(caption__isnull=False)
            .values_list("task_id", "caption_id", "caption__text")}


def rating_value(kind, value) -> float | None:
    """A rating as a number in [0, 1] (None when the vote holds none)."""
    minimum, maximum = getattr(kind, "minimum", None), getattr(kind, "maximum", None)
    if minimum is not None and maximum is not None:
        score = kind.label_of(value)
        return None if score is None else (float(score) - minimum) / ((maximum - minimum) or 1)
    label = kind.label_of(value)
    if label is None or not kind.choices:
        return None
    return 1.0 if label == kind.choices[0].value else 0.0


def ratings(write: Campaign, captions: dict) -> list[tuple[int, int, float]]:
    """(rater, caption id, rating) of the rating campaign's counted votes on the written captions."""
    rate = write.rate_campaign
    if rate is None or not captions:
        return []
    kind = rate.kind_spec
    blocked = Membership.objects.filter(campaign=rate, blocked=True).values("worker_id")
    votes = (Vote.objects.filter(campaign=rate, role=Task.Role.REAL, quarantined=False,
                                 task__caption_id__in=list(captions))
             .exclude(assignment__state=Assignment.State.REJECTED).exclude(worker__blocked=True)
             .exclude(worker_id__in=blocked).values_list("worker_id", "task__caption_id", "value"))
    out = []
    for worker, caption, value in votes.iterator(chunk_size=5000):
        number = rating_value(kind, value)
        if number is not None:
            out.append((worker, caption, number))
    return out


def comparisons(rated: list[tuple[int, int, float]], captions: dict) -> list[tuple[int, int, int, int]]:
    """(rater, left, right, winner) for every two captions of one image one rater rated differently."""
    by_rater_image: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
    for worker, caption, number in rated:
        by_rater_image[(worker, captions[caption][0])].append((caption, number))
    out = []
    for (worker, _task), items in by_rater_image.items():
        for i, (a, x) in enumerate(items):
            for b, y in items[i + 1:]:
                if x != y:
                    out.append((worker, a, b, a if x > y else b))
    return out


def bradley_terry_strengths(pairs: list[tuple[int, int, int, int]]) -> dict[int, float]:
    """{caption id: strength} by Bradley-Terry (``annotation.bradley_terry``: numpy only, so the
    page ranks in the web process without loading crowd-kit or pandas there)."""
    from .bradley_terry import fit

    strengths = fit((left, right, winner) for _worker, left, right, winner in pairs)
    return {int(k): v for k, v in strengths.items() if math.isfinite(v)}


def _pick(candidates: dict[int, float], captions: dict) -> tuple[int, bool]:
    top = max(candidates.values())
    best = sorted(c for c, v in candidates.items() if math.isclose(v, top, rel_tol=1e-9, abs_tol=1e-12))
    return best[0], len(best) > 1


def best_captions(write: Campaign, method: str = "bradley_terry") -> dict[int, Best]:
    """{write task id: Best} for every image with at least one written caption."""
    captions = written_captions(write)
    if method == "rover":
        return _rover(write, captions)
    rated = ratings(write, captions)
    per_caption: dict[int, list[float]] = defaultdict(list)
    for _worker, caption, number in rated:
        per_caption[caption].append(number)
    per_task: dict[int, list[int]] = defaultdict(list)
    for caption, (task, _text) in captions.items():
        per_task[task].append(caption)
    strengths: dict[int, float] = {}
    compared: dict[int, int] = defaultdict(int)
    if method == "bradley_terry":
        pairs = comparisons(rated, captions)
        for _w, a, b, _win in pairs:
            compared[captions[a][0]] += 1
        try:
            strengths = bradley_terry_strengths(pairs)
        except Exception as exc:  # a numerical failure falls back to the mean rating, per image
            log.exception("Bradley-Terry over written captions of campaign %s failed: %s", write.pk, exc)
    out = {}
    for task, ids in per_task.items():
        counts = {"captions": len(ids), "ratings": sum(len(per_caption.get(c, ())) for c in ids),
                  "comparisons": compared.get(task, 0)}
        scored = {c: strengths[c] for c in ids if c in strengths} if compared.get(task) else {}
        if len(scored) == len(ids) and sum(scored.values()) > 0:
            total = sum(scored.values())
            shares = {c: v / total for c, v in scored.items()}
            caption, tie = _pick(shares, captions)
            out[task] = Best(caption, captions[caption][1], shares[caption], "bradley_terry", tie, counts)
            continue
        means = {c: sum(per_caption[c]) / len(per_caption[c]) for c in ids if per_caption.get(c)}
        if not means:
            out[task] = Best(None, "", None, method, False, counts)
            continue
        caption, tie = _pick(means, captions)
        out[task] = Best(caption, captions[caption][1], means[caption], "mean_rating", tie, counts)
    return out


def _rover(write: Campaign, captions: dict) -> dict[int, Best]:
    n_written: dict[int, int] = defaultdict(int)
    for task, _text in captions.values():
        n_written[task] += 1
    out = {}
    for a in Aggregate.objects.filter(task__campaign=write, method="rover", part=""):
        out[a.task_id] = Best(None, "" if a.label is None else str(a.label), a.confidence, "rover", False,
                              {"captions": n_written.get(a.task_id, a.n_votes)})
    for task, n in n_written.items():
        out.setdefault(task, Best(None, "", None, "rover", False, {"captions": n}))
    return out


def write_summary(write: Campaign) -> dict:
    """The write campaign's dashboard card: captions written, images covered, best captions chosen."""
    captions = written_captions(write)
    images = {task for task, _ in captions.values()}
    summary = {"captions": len(captions), "images": len(images),
               "tasks": write.tasks.filter(role=Task.Role.REAL).count(), "rate_campaign": write.rate_campaign,
               "chosen": 0, "by_method": {}}
    if write.rate_campaign_id:
        best = best_captions(write, "bradley_terry")
        chosen = [b for b in best.values() if b.caption_id is not None]
        summary["chosen"] = len(chosen)
        for b in chosen:
            summary["by_method"][b.method] = summary["by_method"].get(b.method, 0) + 1
    return summary


__all__ = ["Best", "best_captions", "written_captions", "ratings", "comparisons", "rating_value",
           "bradley_terry_strengths", "write_summary"]
