"""The filters that use the model pack run with every socket to a non-loopback address blocked (DNS lookups
too): the conceptual-captions preset with image labels and the zero-shot unsafe check, then alignment and
semantic duplicates of captions and images, all through the executor, loading the tiny CLIP and the packaged
sentence encoder from local files."""
import hashlib

import pytest
from django.core.files.base import ContentFile

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, RunChunk
from curation.pipeline import executor
from curation.services import run_create
from tests.curation.test_presets import CC_ALT_TEXTS, run_preset

pytestmark = pytest.mark.django_db


@pytest.fixture
def collection(shared_photos):
    collection = Collection.objects.create(name="offline photos")
    for i, path in enumerate(sorted(shared_photos.glob("*.jpg"))[:4]):
        data = path.read_bytes()
        image = Image(collection=collection, external_id=f"o{i}", format="JPEG", width=800, height=600,
                      sha256=hashlib.sha256(data).hexdigest())
        image.file.save(f"o{i}.jpg", ContentFile(data), save=False)
        image.save()
        Caption.objects.create(image=image, text=CC_ALT_TEXTS[i % 3], origin="alt_text")
        Caption.objects.create(image=image, text=CC_ALT_TEXTS[i % 3].lower(), origin="alt_text")
    return collection


def run_steps(collection, steps: list[dict]) -> FilterRun:
    pipeline = Pipeline.objects.create(name=f"offline {len(steps)}", steps=steps)
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda *a: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    return run


def test_the_model_filters_run_with_outside_sockets_blocked(tiny_clip, collection, no_outside_network):
    preset = run_preset(collection, "conceptual-captions", unsafe_content={"max_unsafe": 1.0})
    assert preset.status == FilterRun.Status.DONE, preset.error
    assert FilterDecision.objects.filter(run=preset, filter_name="image_labels", reason="labelled").count() == 4
    run = run_steps(collection, [{"filter": "alignment", "params": {"mode": "top_percent", "top_percent": 50}},
                                 {"filter": "semantic_duplicates"},
                                 {"filter": "semantic_duplicate_images", "params": {"keep": "first"}}])
    assert run.status == FilterRun.Status.DONE, run.error
    by_filter = {}
    for decision in FilterDecision.objects.filter(run=run):
        by_filter.setdefault(decision.filter_name, []).append(decision)
    assert {d.reason for d in by_filter["alignment"]} == {"aligned", "below_top_percent"}
    # Each alt-text and its lower-cased copy: one cluster each, kept for the curator's review (the default).
    duplicates = [d for d in by_filter["semantic_duplicates"] if d.reason == "possible_duplicate"]
    assert duplicates and all(d.details["size"] >= 2 for d in duplicates)
    assert all(d.details.get("model") for decisions in by_filter.values() for d in decisions)
