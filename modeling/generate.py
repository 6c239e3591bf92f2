"""Close the loop: a captioner version's generated captions go back to curation as Captions with
origin "model" (source "model captioner v<N>", metadata naming the version and run), and one call
makes a human-evaluation campaign over the captions of several runs: GOOD/BAD ("quality", seed 002),
Good/Common/Bad ("good_common_bad", seed 000) or relevance+fluency with the runs' captions of each
image as candidates, shuffled together ("relevance_fluency", seed 004).

Reranking (seed 004's "late translation rerank"): with ``rerank=True`` the beam's candidates are
ordered by the fluency f of a fluency classifier version and the most fluent one is stored; the
caption's source ("model captioner v<N> reranked by fluency v<M>") and metadata name that version.

torch is imported only where captions are generated (a worker on the ``gpu`` queue, or the CLI); the
web process calls ``check_runs`` and ``resolve_reranker`` alone.
"""
from __future__ import annotations

import random
from collections import Counter

from django.db import transaction

from modeling.captioning.provenance import version_entry
from modeling.models import Kind, ModelVersion, TrainingRun
from modeling.trainers.base import TrainingError

EVALUATION_KINDS = ("quality", "good_common_bad", "relevance_fluency")
CHUNK = 8  # images per beam-search batch: progress is reported (and captions committed) per chunk


def source_label(version: ModelVersion, reranker: ModelVersion | None = None) -> str:
    label = f"model {version.kind} v{version.version}"
    return f"{label} reranked by fluency v{reranker.version}" if reranker is not None else label


def generated_captions(version: ModelVersion, reranker: ModelVersion | None = None):
    """The captions ``version`` generated (with the beam reranked by ``reranker``, or not)."""
    from curation.models import Caption

    return Caption.objects.filter(origin=Caption.Origin.MODEL, metadata__model_version=version.pk,
                                  source=source_label(version, reranker))


def resolve_reranker(rerank: bool, fluency_version=None) -> ModelVersion | None:
    """The fluency version that reranks, or None without ``rerank``. Raises NoFluencyModel (a
    TrainingError with code "no_active_version") when reranking is asked and no version is active."""
    if not rerank:
        return None
    from modeling.fluency import resolve

    if isinstance(fluency_version, dict):
        fluency_version = ModelVersion.objects.filter(pk=fluency_version.get("pk"), kind=Kind.FLUENCY).first() \
            or fluency_version.get("version")
    return resolve(fluency_version)


def caption_targets(version: ModelVersion, split: str | None = None, limit: int | None = None) -> list[dict]:
    """The distinct images of the version's release split (its evaluation split by default), in
    release order: [{image_id, image_file, language}]."""
    from releases.models import ReleaseItem

    if version.kind != Kind.CAPTIONER:
        raise TrainingError(f"{version} is not a captioner.", code="bad_config")
    info = (version.config or {}).get("info") or {}
    split = split or info.get("eval_split", "test")
    items = (ReleaseItem.objects.filter(release_id=info.get("release"), split=split, image__isnull=False)
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
    return rows


def rerank_candidates(candidates: list[tuple[str, float]], reranker: ModelVersion) -> list[list]:
    """Beam candidates [(text, beam score)] as [[text, beam score, f]], most fluent first (ties keep
    the beam's order). Empty texts are not scored and go last."""
    from modeling.fluency import rerank

    scores: dict[str, float] = {}
    for text, score in candidates:
        scores.setdefault(text, score)  # a text the beam found twice keeps its better score
    texts = list(dict.fromkeys(t for t, _ in candidates if t.strip()))
    ranked = [[t, scores[t], f] for t, f in rerank(texts, version=reranker)] if texts else []
    return ranked + [[t, s, None] for t, s in candidates if not t.strip()]


def generate_captions(version: ModelVersion, *, split: str | None = None, limit: int | None = None,
                      beam_size: int | None = None, rerank: bool = False, fluency_version=None,
                      progress=None) -> list:
    """Caption the images of the version's release split and store one Caption per image: the best
    beam, or with ``rerank`` the most fluent beam candidate. Images already captioned (by this version
    and reranker) are kept, not captioned again, so a repeated call only does what is missing.

    ``progress(n)`` is called with the number of images finished, skipped ones first."""
    from curation.models import Caption

    reranker = resolve_reranker(rerank, fluency_version)  # before any work: no model, nothing generated
    rows = caption_targets(version, split, limit)
    source = source_label(version, reranker)
    made = {}
    for c in Caption.objects.filter(image_id__in=[r["image_id"] for r in rows], source=source,
                                    origin=Caption.Origin.MODEL).order_by("pk"):
        made.setdefault(c.image_id, c)
    todo = [r for r in rows if r["image_id"] not in made]
    if progress and len(rows) > len(todo):
        progress(len(rows) - len(todo))
    if todo:
        for row, text, candidates in _beam(version, todo, beam_size, reranker, progress):
            made[row["image_id"]] = _store(version, row, text, candidates, source, reranker)
    return [made[r["image_id"]] for r in rows]


def _beam(version, rows, beam_size, reranker, progress):
    """(row, chosen text, candidates) per row, computed a chunk at a time; ``progress`` after each."""
    import torch

    from modeling.captioning.data import load_image
    from modeling.registry import load_version

    device = "cuda" if torch.cuda.is_available() else "cpu"
    trainer, model, info = load_version(version, device=device)
    beam = int(beam_size or trainer.config((version.config or {}).get("config")).get("beam_size", 5))
    size = int(info["image_size"])
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start:start + CHUNK]
        names = [r["image_file"] for r in chunk]
        # A captioner on a pretrained encoder reads images through that encoder's processor (trainer.images_for).
        images = trainer.images_for(names, info) if hasattr(trainer, "images_for") else \
            torch.stack([load_image(name, size) for name in names])
        outputs = trainer.generate(model, images, info, torch.device(device), beam)
        for row, (text, candidates) in zip(chunk, outputs):
            if reranker is not None:
                ranked = rerank_candidates(candidates, reranker)
                yield row, (ranked[0][0] if ranked else text), ranked
            else:
                yield row, text, [[t, s] for t, s in candidates]
        if progress:
            progress(len(chunk))


def _store(version, row, text, candidates, source, reranker):
    from curation.models import Caption

    metadata = {"model_version": version.pk, "version": version.version, "kind": version.kind,
                "run": version.run_id, "trainer": (version.config or {}).get("trainer", ""),
                "score": candidates[0][1] if candidates else None, "candidates": candidates}
    if reranker is not None:
        metadata["fluency_version"] = version_entry(reranker, role="rerank")
        metadata["fluency"] = candidates[0][2] if candidates else None
    training = ((version.config or {}).get("info") or {}).get("fluency_version")
    if training:
        metadata["training_fluency_version"] = training
    with transaction.atomic():
        existing = Caption.objects.filter(image_id=row["image_id"], source=source, text=text or "<empty>").first()
        return existing or Caption.objects.create(
            image_id=row["image_id"], text=text or "<empty>", origin=Caption.Origin.MODEL, source=source,
            language=row["language"] or "", metadata=metadata)


def check_runs(runs, kind: str | None = None) -> list[ModelVersion]:
    """The model versions of ``runs`` (TrainingRuns or ids), each a finished captioner run; with an
    evaluation ``kind``, also that kind's needs. CampaignError naming the field otherwise."""
    from annotation.services import CampaignError

    if kind is not None and kind not in EVALUATION_KINDS:
        raise CampaignError(f"Unknown evaluation kind {kind!r}; use one of {', '.join(EVALUATION_KINDS)}.",
                            field="kind")
    runs = [r if isinstance(r, TrainingRun) else TrainingRun.objects.filter(pk=r).first() for r in runs]
    if not runs or any(r is None for r in runs):
        raise CampaignError("Choose finished captioner runs.", field="runs")
    versions = []
    for run in runs:
        version = ModelVersion.objects.filter(run=run).first()
        if run.kind != Kind.CAPTIONER or run.status != TrainingRun.Status.DONE or version is None:
            raise CampaignError(f"Run {run} is not a finished captioner run with a model version.", field="runs")
        versions.append(version)
    if kind == "relevance_fluency" and len(versions) < 2:
        raise CampaignError("Relevance and fluency compares candidates: choose at least two runs.", field="runs")
    return versions


def evaluation_campaign(runs, kind: str, user=None, name: str = "", *, rerank: bool = False, fluency_version=None,
                        beam_size: int | None = None, progress=None, **fields):
    """A draft campaign of ``kind`` over the generated captions of ``runs`` (TrainingRuns or ids of
    finished captioner runs); captions are generated first where a run has none yet (reranked by
    fluency with ``rerank``). ``progress(n)``: images captioned, as in ``generate_captions``."""
    versions = check_runs(runs, kind)
    reranker = resolve_reranker(rerank, fluency_version)
    per_version = evaluation_captions(versions, reranker, beam_size=beam_size, progress=progress)
    return evaluation_campaign_create(versions, kind, per_version, user=user, name=name, reranker=reranker, **fields)


def evaluation_captions(versions, reranker=None, *, beam_size=None, progress=None) -> dict:
    """{version pk: its captions of its evaluation split}, generating what is missing."""
    from curation.models import Caption

    per_version = {}
    for version in versions:
        captions = generate_captions(version, beam_size=beam_size, rerank=reranker is not None,
                                     fluency_version=reranker, progress=progress)
        per_version[version.pk] = list(Caption.objects.filter(pk__in=[c.pk for c in captions])
                                       .select_related("image").order_by("image_id", "pk"))
    return per_version


def evaluation_campaign_create(versions, kind: str, per_version: dict, *, user=None, name: str = "", reranker=None,
                               **fields):
    """The campaign and its tasks over ``per_version``'s captions, in one transaction."""
    from annotation.models import Task
    from annotation.services import CampaignError

    collections = Counter(c.image.collection_id for caps in per_version.values() for c in caps)
    collection_id = collections.most_common(1)[0][0]
    name = name or f"Evaluation of runs {', '.join(str(v.run_id) for v in versions)} ({kind})"
    with transaction.atomic():
        campaign = _campaign(name, kind, user, collection_id, versions, reranker, fields)
        tasks = _tasks(campaign, kind, versions, per_version, collection_id)
        if not tasks:
            raise CampaignError("The runs' generated captions give no items to evaluate.", code="empty",
                                field="runs")
        Task.objects.bulk_create(tasks)
    return campaign


def _campaign(name, kind, user, collection_id, versions, reranker, fields):
    from annotation.services import campaign_create

    campaign = campaign_create(name=name, kind=kind, user=user,
                               selection={"collection": collection_id, "origin": "model"}, **fields)
    campaign.tasks.all().delete()  # replaced by exactly these runs' captions
    campaign.selection = dict(campaign.selection, runs=[v.run_id for v in versions],
                              model_versions=[v.pk for v in versions])
    if reranker is not None:
        campaign.selection["fluency_version"] = version_entry(reranker, role="rerank")
    campaign.save(update_fields=["selection"])
    return campaign


def _tasks(campaign, kind, versions, per_version, collection_id) -> list:
    from annotation.models import Task

    rng = random.Random(campaign.pk)
    tasks = []
    if kind == "quality":
        captions = sorted((c for caps in per_version.values() for c in caps
                           if c.image.collection_id == collection_id), key=lambda c: (c.image_id, c.pk))
        for position, c in enumerate(captions, start=1):
            tasks.append(Task(campaign=campaign, image_id=c.image_id, caption_id=c.pk, candidates=[],
                              votes_required=campaign.votes_per_item, position=position, priority=float(position)))
        return tasks
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
    return tasks
