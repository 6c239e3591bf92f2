"""Builders for release tests: images with real bytes in the per-test storage, Conceptual Captions
example captions (seed 002, Table 1), a finished filter run with decisions and a transform, a pipeline
run through the executor in the test's process (hypernymization's "review the guesses" run among them),
and a quality campaign with votes aggregated by annotation.aggregation."""
from __future__ import annotations

import hashlib
import io
import random

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from PIL import Image as PILImage

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, RunChunk
from releases.models import Release

# Seed 002 (Conceptual Captions), Table 1 and Figure 1: alt-texts and what the pipeline made of them.
CC_PAIRS = [
    ("Harrison Ford and Calista Flockhart attend the premiere of 'Hollywood Homicide' at the 29th American "
     "Film Festival September 5, 2003 in Deauville, France.", "actors attend the premiere at festival."),
    ("Side view of a British Airways Airbus A319 aircraft on approach to land with landing gear down - Stock Image",
     "side view of an aircraft on approach to land with landing gear down"),
    ("Two sculptures by artist Duncan McKellar adorn trees outside the derelict Norwich Union offices in "
     "Bristol, UK - Stock Image", "sculptures by person adorn trees outside the derelict offices"),
    ("Jimmy Barnes performs at the Sydney Entertainment Centre", "actor performs at the entertainment centre"),
]
CC_EXTRA = [
    "actor attends the premiere of the film",
    "a worker helps to clear the debris",
    "the player celebrates scoring his side's second goal",
    "a man riding a horse on the beach",
    "pop artist performs at the festival in a city",
    "person walks past a painting at the museum",
]


def image_bytes(seed: int, size=(32, 24), fmt="PNG") -> bytes:
    """A noise image: different seeds give different bytes and different perceptual hashes."""
    rng = random.Random(seed)
    img = PILImage.new("RGB", size)
    img.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(size[0] * size[1])])
    out = io.BytesIO()
    img.save(out, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return out.getvalue()


def add_image(collection: Collection, data: bytes | None = None, *, seed: int = 0, fmt: str = "PNG",
              save_file: bool = True, **fields) -> Image:
    data = data if data is not None else image_bytes(seed, fmt=fmt)
    sha = hashlib.sha256(data).hexdigest()
    with PILImage.open(io.BytesIO(data)) as img:
        width, height, pil_format = img.width, img.height, img.format
    ext = Image.FORMATS[pil_format][0]
    name = f"images/{sha[:2]}/{sha}.{ext}"
    if save_file and not default_storage.exists(name):
        default_storage.save(name, ContentFile(data))
    fields.setdefault("license", "https://creativecommons.org/licenses/by/2.0/")
    fields.setdefault("credit", "sneakerdog")
    return Image.objects.create(collection=collection, file=name, sha256=sha, width=width, height=height,
                                format=pil_format, file_size=len(data), status=Image.Status.READY, **fields)


def add_caption(image: Image, text: str, *, origin: str = "alt_text", source: str = "cc.tsv", parent=None,
                **fields) -> Caption:
    return Caption.objects.create(image=image, text=text, origin=origin, source=source, parent=parent,
                                  language=fields.pop("language", "en"), **fields)


def cc_collection(name: str = "cc", n_images: int = 4, *, seed0: int = 0) -> tuple[Collection, list[Image]]:
    """A collection of ``n_images`` generated images, each with a Conceptual Captions example."""
    collection = Collection.objects.create(name=name, source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    texts = [alt for alt, _ in CC_PAIRS] + CC_EXTRA
    images = []
    for i in range(n_images):
        image = add_image(collection, seed=seed0 + i, external_id=f"img-{i}")
        add_caption(image, texts[i % len(texts)])
        images.append(image)
    return collection, images


def make_release(name: str = "r1", **config) -> Release:
    return Release.objects.create(name=name, config=config)


def finished_run(collection: Collection, steps: list[dict] | None = None, **fields) -> FilterRun:
    steps = steps or [
        {"filter": "image_check", "version": 3, "label": "Image check", "target": "image", "run_level": False,
         "transform": False, "params": {}},
        {"filter": "alt_text_quality", "version": 2, "label": "Alt-text quality", "target": "caption",
         "run_level": False, "transform": False, "params": {}},
        {"filter": "hypernymize", "version": 1, "label": "Hypernymization", "target": "caption",
         "run_level": False, "transform": True, "params": {}},
    ]
    return FilterRun.objects.create(collection=collection, snapshot=steps, status=FilterRun.Status.DONE,
                                    versions={"spacy": "3.8.18", "fluency-model": "v4"}, **fields)


def executed_run(collection: Collection, steps: list[dict], *, name: str) -> FilterRun:
    """A pipeline of ``steps`` saved as ``name`` and run over ``collection`` by curation.pipeline.executor
    in the test's process, chunk after chunk, with no broker: the run, finished (asserted)."""
    from curation.pipeline import executor
    from curation.services import run_create

    pipeline = Pipeline.objects.create(name=name, steps=steps)
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    assert run.status == FilterRun.Status.DONE
    return run


REVIEW_THE_GUESSES = [{"filter": "hypernymize", "params": {"on_uncertain": "review"}}]


def review_guesses_run(collection: Collection, *, name: str = "hypernyms, review the guesses") -> FilterRun:
    """Hypernymization with on_uncertain="review", finished over ``collection``: a rewrite that rests on a
    guess is kept with the reason uncertain_rewrite, for a verify-rewrite campaign to check."""
    return executed_run(collection, REVIEW_THE_GUESSES, name=name)


def news_desk(texts: list[str], *, seed0: int, prefix: str) -> Collection:
    """The collection "news desk": one generated image a text (real bytes, ids ``<prefix>-<i>``), each
    captioned with its text."""
    collection = Collection.objects.create(name="news desk", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    for i, text in enumerate(texts):
        add_caption(add_image(collection, seed=seed0 + i, external_id=f"{prefix}-{i}"), text)
    return collection


def decide(run: FilterRun, step: int, image: Image, caption: Caption | None, outcome: str, *, score=None,
           reason="", override="", text_after="") -> FilterDecision:
    return FilterDecision.objects.create(
        run=run, step=step, filter_name=run.snapshot[step]["filter"], image=image, caption=caption,
        outcome=outcome, score=score, reason=reason, override=override,
        text_before=caption.text if caption and text_after else "", text_after=text_after)


def transformed(run: FilterRun, step: int, caption: Caption, text: str) -> Caption:
    """The child caption a run's transform makes (as curation.pipeline.executor saves it)."""
    return Caption.objects.create(image=caption.image, text=text, origin=Caption.Origin.TRANSFORMED,
                                  parent=caption, source=f"run {run.pk}: {run.snapshot[step]['filter']}",
                                  language=caption.language,
                                  metadata={"run": run.pk, "step": step, "filter": run.snapshot[step]["filter"]})


def rating_campaign(collection: Collection, votes: dict[Caption, list[str]], *, kind: str = "quality",
                    name: str = "quality", aggregate: bool = True):
    """A campaign with one task per caption and the given labels as votes of distinct workers, then
    aggregated with annotation.aggregation.aggregate_campaign."""
    from annotation.aggregation import aggregate_campaign
    from annotation.models import Campaign, Task, Vote, Worker

    campaign = Campaign.objects.create(name=name, kind=kind, collection=collection, status="running",
                                       votes_per_item=3)
    workers = {}
    for position, (caption, labels) in enumerate(votes.items(), start=1):
        task = Task.objects.create(campaign=campaign, image=caption.image, caption=caption, position=position,
                                   votes_required=len(labels), votes_count=len(labels), status="done")
        for i, label in enumerate(labels):
            if i not in workers:
                workers[i] = Worker.objects.get_or_create(provider="linkout", external_id=f"w{i}")[0]
            Vote.objects.create(task=task, worker=workers[i], campaign=campaign, value={"label": label})
    if aggregate:
        aggregate_campaign(campaign.pk)
    return campaign
