"""The seed presets end to end through the executor, on real texts and photographs."""
import csv

import pytest

from curation.models import Caption, CaptionSeed, Collection, FilterDecision, FilterRun, Image, ImageTopics, RunChunk
from curation.pipeline import executor
from curation.pipeline.presets import PRESETS, ensure_presets
from curation.services import run_create

pytestmark = pytest.mark.django_db

# Alt-texts of seed 002 (Figure 1 and Table 1).
CC_ALT_TEXTS = [
    "A Pakistani worker helps to clear the debris from the Taj Mahal Hotel November 7, 2005 in Balakot, Pakistan.",
    "Musician Justin Timberlake performs at the 2017 Pilgrimage Music & Cultural Festival on September 23, 2017 in Franklin, Tennessee.",
    "Harrison Ford and Calista Flockhart attend the premiere of 'Hollywood Homicide' at the 29th American Film Festival September 5, 2003 in Deauville, France.",
]


def run_preset(collection, name, **params):
    """Run a preset; ``params`` override a step's parameters by filter name."""
    pipeline = next(p for p in ensure_presets() if p.name == name)
    if params:
        pipeline.steps = [{**s, "params": {**s.get("params", {}), **params.get(s["filter"], {})}} for s in pipeline.steps]
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda *a: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    return run


def test_every_preset_step_names_an_installed_filter():
    from curation.pipeline import registry

    known = registry.load_all()
    for name, preset in PRESETS.items():
        assert [s["filter"] for s in preset["steps"] if s["filter"] not in known] == [], name


def test_conceptual_captions_on_real_photos_keeps_paper_alt_texts_and_drops_camera_titles(shared_photos):
    collection = Collection.objects.create(name="openimages")
    with open(shared_photos / "credits.csv", newline="", encoding="utf-8") as fh:
        credits = list(csv.DictReader(fh))[:8]
    from curation.ingest.images import store_image_file, verify_image

    for i, row in enumerate(credits):
        verified = verify_image((shared_photos / f"{row['ImageID']}.jpg").read_bytes())
        image = Image(collection=collection, external_id=row["ImageID"])
        store_image_file(image, verified)
        image.save()
        Caption.objects.create(image=image, text=row["Title"], origin="alt_text")
        Caption.objects.create(image=image, text=CC_ALT_TEXTS[i % 3], origin="alt_text")
    run = run_preset(collection, "conceptual-captions")
    assert run.status == FilterRun.Status.DONE, run.error
    assert run.chunks_failed == 0
    funnel = {row["filter"]: row for row in run.funnel}
    assert funnel["image_format"]["entered"] == 8
    # Camera file names and title-case web titles never pass the text filters.
    titles = FilterDecision.objects.filter(run=run, caption__text__in=[r["Title"] for r in credits], outcome="drop")
    assert titles.values("caption").distinct().count() == len({r["Title"] for r in credits})
    # The paper's alt-texts on images that survive the image filters come out hypernymized.
    children = Caption.objects.filter(image__collection=collection, origin="transformed", source__contains="hypernymize")
    for child in children:
        assert "Justin Timberlake" not in child.text and "2005" not in child.text
        assert child.lineage()[-1].text in CC_ALT_TEXTS


def test_ava_captions_scores_comments_drops_images_without_kept_comments_and_stores_topics():
    collection = Collection.objects.create(name="ava")
    informative = [
        "The rusty red tractor contrasts nicely with the golden wheat field behind it.",
        "I like how the low sun lights the old stone bridge over the misty river.",
        "The dark silhouette of the lone tree against the orange sky makes this photo.",
        "The reflection of the tall white church in the still lake is very sharp.",
    ]
    chatter = ["Great shot, nice colors!", "Nice shot, well done!", "Great photo, congrats on the ribbon!",
               "Wow!!! love it", "nice"]
    for i in range(12):
        image = Image.objects.create(collection=collection, external_id=f"ava{i}", status="missing")
        texts = chatter[i % len(chatter):] if i % 3 == 0 else [informative[i % 4], chatter[i % len(chatter)]]
        for text in texts:
            Caption.objects.create(image=image, text=text, origin="web_comment")
    # rho grows with the corpus: the paper's 20 suits 1.5M AVA comments, a 20-comment corpus needs less.
    run = run_preset(collection, "ava-captions", informativeness={"min_rho": 8}, lda_topics={"n_topics": 3, "max_doc_freq": 0.9, "min_doc_count": 1})
    assert run.status == FilterRun.Status.DONE, run.error
    funnel = {row["filter"]: row for row in run.funnel}
    scores = dict(FilterDecision.objects.filter(run=run, filter_name="informativeness").values_list("caption__text", "score"))
    assert funnel["informativeness"]["kept"] >= 1, scores
    assert max(scores[t] for t in informative if t in scores) > max(scores.get(t, 0) for t in chatter)
    dropped_images = FilterDecision.objects.filter(run=run, filter_name="images_without_comments", outcome="drop")
    assert dropped_images.exists()
    for decision in dropped_images:
        assert not FilterDecision.objects.filter(run=run, image=decision.image, filter_name="informativeness",
                                                 outcome="keep").exists()
    kept_images = set(FilterDecision.objects.filter(run=run, filter_name="informativeness", outcome="keep")
                      .values_list("image_id", flat=True))
    assert ImageTopics.objects.exists()
    assert set(ImageTopics.objects.values_list("image_id", flat=True)) <= kept_images


def test_museum_seeds_extracts_subject_relation_object_seeds():
    collection = Collection.objects.create(name="museum")
    image = Image.objects.create(collection=collection, external_id="ms9", status="missing")
    Caption.objects.create(image=image, text="Saint George, on a white horse, slays the dragon.", origin="museum")
    run = run_preset(collection, "museum-seeds")
    assert run.status == FilterRun.Status.DONE, run.error
    seeds = {(s.subject, s.relation, s.object) for s in CaptionSeed.objects.filter(run=run)}
    assert any(s[0] == "person" and s[2] in ("dragon", "horse") for s in seeds), seeds


def test_a_conceptual_captions_pipeline_made_before_the_model_pack_gets_image_labels_before_label_overlap(db):
    import importlib

    from django.apps import apps

    from curation.models import Pipeline

    old = Pipeline.objects.create(name="cc (2025)", preset="conceptual-captions",
                                  steps=[{"filter": "caption_length"}, {"filter": "label_overlap"}])
    edited = Pipeline.objects.create(name="cc without overlap", preset="conceptual-captions",
                                     steps=[{"filter": "caption_length"}])
    migration = importlib.import_module("curation.migrations.0009_cc_preset_image_labels")
    migration.add_image_labels(apps, None)
    migration.add_image_labels(apps, None)  # once only
    old.refresh_from_db()
    edited.refresh_from_db()
    assert [s["filter"] for s in old.steps] == ["caption_length", "image_labels", "label_overlap"]
    assert [s["filter"] for s in edited.steps] == ["caption_length"]
