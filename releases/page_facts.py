"""What one page of images brings from the database for the selection: the captions, the run's
decisions on images and captions with the curators' reviews of them, the run's transformed
descendants, the seed captions the run's caption_seeds step found in each description, the GOOD
votes per caption and the aggregates per caption. One query each per page (``load_page``), none per
image.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from . import provenance as prov


@dataclass
class PageFacts:
    captions: dict[int, dict]  # caption id -> caption row
    by_image: dict[int, list[dict]]  # image id -> its captions, in id order
    image_decisions: dict[int, list[dict]]  # image id -> the run's decisions on the image
    caption_decisions: dict[int, list[dict]]  # caption id -> the run's decisions on the caption
    reviews: dict[int, list[dict]]  # decision id -> provenance entries of its reviews
    children: dict[int, int]  # caption id -> the run's transformed caption made from it
    seeds: dict[int, list[int]]  # description id -> its seed captions (origin "seed") the run found, in id order
    good_votes: dict[tuple[int, int], int]  # (campaign, caption) -> most GOOD votes on one task
    aggregates: dict[int, list[tuple[str, dict]]]  # caption -> [(dimension, aggregate row)]


def load_page(images: list[dict], *, run, good_campaigns: set[int], blocked: dict[int, set]) -> PageFacts:
    """The facts of ``images`` (rows with ``pk``); ``run`` is the release's FilterRun or None,
    ``good_campaigns`` the campaigns of GOOD-count rules, ``blocked`` their blocked workers."""
    ids = [im["pk"] for im in images]
    captions, by_image = _captions(ids)
    image_decisions, caption_decisions, reviews, children = _decisions(ids, captions, run)
    seeds = _seeds(captions, run)
    good_votes = _good_votes(ids, good_campaigns, blocked) if good_campaigns else {}
    return PageFacts(captions=captions, by_image=by_image, image_decisions=image_decisions,
                     caption_decisions=caption_decisions, reviews=reviews, children=children, seeds=seeds,
                     good_votes=good_votes, aggregates=_aggregates(ids))


def _captions(ids: list[int]):
    from curation.models import Caption

    captions: dict[int, dict] = {}
    by_image: dict[int, list[dict]] = defaultdict(list)
    for c in (Caption.objects.filter(image_id__in=ids).order_by("image_id", "pk")
              .values("pk", "image_id", "text", "language", "origin", "parent_id", "source", "metadata__run",
                      "metadata__seed")):
        captions[c["pk"]] = c
        by_image[c["image_id"]].append(c)
    return captions, by_image


def _decisions(ids: list[int], captions: dict[int, dict], run):
    from curation.models import FilterDecision, Review, decisions_of_images

    image_decisions: dict[int, list[dict]] = defaultdict(list)
    caption_decisions: dict[int, list[dict]] = defaultdict(list)
    reviews: dict[int, list[dict]] = defaultdict(list)
    children: dict[int, int] = {}
    if run is None:
        return image_decisions, caption_decisions, reviews, children
    decisions = {}
    for d in (FilterDecision.objects.filter(decisions_of_images(ids, captions), run=run)
              .order_by("step", "pk")
              .values("pk", "step", "filter_name", "image_id", "caption_id", "outcome", "override", "score",
                      "reason")):
        decisions[d["pk"]] = d
        if d["caption_id"] is None:
            image_decisions[d["image_id"]].append(d)
        else:
            caption_decisions[d["caption_id"]].append(d)
    if decisions:
        for r in (Review.objects.filter(decision_id__in=list(decisions)).order_by("created_at", "pk")
                  .values("decision_id", "outcome", "note", "user__username", "created_at")):
            reviews[r["decision_id"]].append(prov.review_entry(r, decisions[r["decision_id"]]))
    for c in captions.values():
        if c["origin"] == "transformed" and c["parent_id"] and c["metadata__run"] == run.pk:
            children.setdefault(c["parent_id"], c["pk"])  # the lowest id when there are two
    return image_decisions, caption_decisions, reviews, children


def _seeds(captions: dict[int, dict], run) -> dict[int, list[int]]:
    """description id -> its seed captions that ``run`` found (a seed caption is shared by every run that
    found the same seed in the same description: the run's CaptionSeed rows say which ones it found).
    Without a run: every seed caption of the page, by description."""
    from curation.models import CaptionSeed

    seeds: dict[int, list[int]] = defaultdict(list)
    made = [c for c in captions.values() if c["origin"] == "seed" and c["parent_id"]]
    if not made:
        return seeds
    if run is None:
        for c in made:
            seeds[c["parent_id"]].append(c["pk"])
        return seeds
    found = {(caption_id, subject, relation, obj) for caption_id, subject, relation, obj in
             CaptionSeed.objects.filter(run=run, caption_id__in={c["parent_id"] for c in made})
             .values_list("caption_id", "subject", "relation", "object")}
    for c in made:
        triple = c["metadata__seed"] if isinstance(c["metadata__seed"], list) else []
        if len(triple) == 3 and (c["parent_id"], *triple) in found:
            seeds[c["parent_id"]].append(c["pk"])
    return seeds


def _good_votes(ids: list[int], good_campaigns: set[int], blocked: dict[int, set]) -> dict[tuple[int, int], int]:
    """(campaign, caption) -> the most GOOD votes of unblocked workers on one task."""
    from annotation.models import Task, Vote

    good_votes: dict[tuple[int, int], int] = {}
    per_task: dict[tuple, int] = defaultdict(int)
    for task_id, caption_id, campaign_id, worker_id, value, worker_blocked in (
            Vote.objects.filter(campaign_id__in=good_campaigns, role=Task.Role.REAL,
                                task__role=Task.Role.REAL, task__image_id__in=ids)
            .values_list("task_id", "task__caption_id", "campaign_id", "worker_id", "value",
                         "worker__blocked")):
        if caption_id is None or worker_blocked or worker_id in blocked[campaign_id]:
            continue
        label = value.get("label") if isinstance(value, dict) else None
        score = value.get("score") if isinstance(value, dict) else None
        if label == "good" or (isinstance(score, (int, float)) and score >= 50):
            per_task[(campaign_id, caption_id, task_id)] += 1
    for (campaign_id, caption_id, _task), n in per_task.items():
        key = (campaign_id, caption_id)
        good_votes[key] = max(good_votes.get(key, 0), n)
    return good_votes


def _aggregates(ids: list[int]) -> dict[int, list[tuple[str, dict]]]:
    """caption -> [(dimension, aggregate row)]; a candidates task's parts name their caption."""
    from annotation.models import Aggregate, Task

    aggregates: dict[int, list[tuple[str, dict]]] = defaultdict(list)
    for a in (Aggregate.objects.filter(task__image_id__in=ids, task__role=Task.Role.REAL)
              .order_by("task__campaign_id", "task_id", "part", "method")
              .values("task_id", "task__caption_id", "task__campaign_id", "part", "method", "label",
                      "confidence", "n_votes")):
        if a["part"] and ":" in a["part"]:
            cid, dimension = a["part"].split(":", 1)
            if not cid.isdigit():
                continue
            aggregates[int(cid)].append((dimension, a))
        elif a["task__caption_id"] is not None:
            aggregates[a["task__caption_id"]].append(("", a))
    return aggregates


__all__ = ["PageFacts", "load_page"]
