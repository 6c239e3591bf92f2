"""Close the loop: a captioner version's generated captions go back to curation as Captions with
origin "model" (source "model captioner v<N>", metadata naming the version and run), and one call
makes a human-evaluation campaign over the captions of several runs: GOOD/BAD ("quality", seed 002),
Good/Common/Bad ("good_common_bad", seed 000) or relevance+fluency with the runs' captions of each
image as candidates, shuffled together ("relevance_fluency", seed 004)."""
from __future__ import annotations

import random
from collections import Counter

from django.db import transaction

from modeling.models import Kind, ModelVersion, TrainingRun
from modeling.trainers.base import TrainingError

EVALUATION_KINDS = ("quality", "good_common_bad", "relevance_fluency")


def source_label(version: ModelVersion) -> str:
    return f"model {version.kind} v{version.version}"


def generated_captions(version: ModelVersion):
    from curation.models import Caption

    return Caption.objects.filter(origin=Caption.Origin.MODEL, metadata__model_version=version.pk)


def generate_captions(version: ModelVersion, *, split: str | None = None, limit: int | None = None,
                      beam_size: int | None = None) -> list:
    """Caption the images of the version's release split (its evaluation split by default) and store
    the best beam per image as a Caption; already generated ones are kept, not duplicated."""
    from curation.models import Caption, ReleaseItem

    from modeling.captioning.data import load_image
    from modeling.registry import load_version

    if version.kind != Kind.CAPTIONER:
        raise TrainingError(f"{version} is not a captioner.", code="bad_config")
    trainer, model, info = load_version(version)
    split = split or info.get("eval_split", "test")
    items = (ReleaseItem.objects.filter(release_id=info["release"], split=split, image__isnull=False)
             .order_by("position").values("image_id", "image_file", "language"))
    seen, rows = set(), []
    for item in items:
        if item["image_id"] not in seen:
            seen.add(item["image_id"])
            rows.append(item)
    rows = rows[:limit] if limit else rows
    if not rows:
        raise TrainingError(f"The {split} split of the release of {version} has no images to caption.",
                            code="bad_config")
    import torch

    images = torch.stack([load_image(r["image_file"], int(info["image_size"])) for r in rows])
    beam = int(beam_size or trainer.config((version.config or {}).get("config")).get("beam_size", 5))
    outputs = trainer.generate(model, images, info, torch.device("cpu"), beam)
    source = source_label(version)
    made = []
    with transaction.atomic():
        for row, (text, candidates) in zip(rows, outputs):
            text = text or "<empty>"
            existing = Caption.objects.filter(image_id=row["image_id"], source=source, text=text).first()
            if existing:
                made.append(existing)
                continue
            made.append(Caption.objects.create(
                image_id=row["image_id"], text=text, origin=Caption.Origin.MODEL, source=source,
                language=row["language"] or "",
                metadata={"model_version": version.pk, "version": version.version, "kind": version.kind,
                          "run": version.run_id, "trainer": (version.config or {}).get("trainer", ""),
                          "score": candidates[0][1] if candidates else None,
                          "candidates": [[t, s] for t, s in candidates]}))
    return made


def evaluation_campaign(runs, kind: str, user=None, name: str = "", **fields):
    """A draft campaign of ``kind`` over the generated captions of ``runs`` (TrainingRuns or ids of
    finished captioner runs); captions are generated first where a run has none yet."""
    from annotation.models import Task
    from annotation.services import CampaignError, campaign_create

    if kind not in EVALUATION_KINDS:
        raise CampaignError(f"Unknown evaluation kind {kind!r}; use one of {', '.join(EVALUATION_KINDS)}.",
                            field="kind")
    runs = [r if isinstance(r, TrainingRun) else TrainingRun.objects.filter(pk=r).first() for r in runs]
    if not runs or any(r is None for r in runs):
        raise CampaignError("Choose finished captioner runs.", field="runs")
    versions = []
    for run in runs:
        version = ModelVersion.objects.filter(run=run).first()
        if run.kind != Kind.CAPTIONER or version is None:
            raise CampaignError(f"Run {run} is not a finished captioner run with a model version.", field="runs")
        versions.append(version)
    if kind == "relevance_fluency" and len(versions) < 2:
        raise CampaignError("Relevance and fluency compares candidates: choose at least two runs.", field="runs")
    per_version = {}
    for version in versions:
        captions = list(generated_captions(version).select_related("image"))
        per_version[version.pk] = captions or generate_captions(version)
    collections = Counter(c.image.collection_id for caps in per_version.values() for c in caps)
    collection_id = collections.most_common(1)[0][0]
    name = name or f"Evaluation of runs {', '.join(str(r.pk) for r in runs)} ({kind})"
    with transaction.atomic():
        campaign = campaign_create(name=name, kind=kind, user=user,
                                   selection={"collection": collection_id, "origin": "model"}, **fields)
        campaign.tasks.all().delete()  # replaced by exactly these runs' captions
        campaign.selection = dict(campaign.selection, runs=[r.pk for r in runs],
                                  model_versions=[v.pk for v in versions])
        campaign.save(update_fields=["selection"])
        rng = random.Random(campaign.pk)
        tasks = []
        if kind == "quality":
            captions = sorted((c for caps in per_version.values() for c in caps
                               if c.image.collection_id == collection_id), key=lambda c: (c.image_id, c.pk))
            for position, c in enumerate(captions, start=1):
                tasks.append(Task(campaign=campaign, image_id=c.image_id, caption_id=c.pk, candidates=[],
                                  votes_required=campaign.votes_per_item, position=position, priority=float(position)))
        else:
            by_image: dict[int, list[int]] = {}
            for version in versions:
                for c in per_version[version.pk]:
                    if c.image.collection_id == collection_id and c.pk not in by_image.get(c.image_id, []):
                        by_image.setdefault(c.image_id, []).append(c.pk)
            position = 0
            for image_id in sorted(by_image):
                candidates = by_image[image_id]
                if kind == "relevance_fluency" and len(candidates) < 2:
                    continue  # two runs wrote the same caption: nothing to compare
                rng.shuffle(candidates)
                position += 1
                tasks.append(Task(campaign=campaign, image_id=image_id, caption_id=None, candidates=candidates,
                                  votes_required=campaign.votes_per_item, position=position, priority=float(position)))
        if not tasks:
            raise CampaignError("The runs' generated captions give no items to evaluate.", code="empty",
                                field="runs")
        Task.objects.bulk_create(tasks)
    return campaign
