"""The conceptual-captions preset with the model pack: with the tiny CLIP registered, image_labels labels the real
photos and label_overlap decides keep or drop for every caption that reaches it (not "n/a"), as in the paper;
with no model registered, the run page says plainly which stages were "not run: no model registered"."""
import csv

import pytest

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image
from curation.pipeline.model_steps import NOT_RUN, step_notes
from curation.pipeline.presets import PRESETS
from tests.curation.test_presets import CC_ALT_TEXTS, run_preset

pytestmark = pytest.mark.django_db


def steps_of(name: str) -> list[str]:
    return [step["filter"] for step in PRESETS[name]["steps"]]


@pytest.fixture
def photo_collection(shared_photos):
    from curation.ingest.images import store_image_file, verify_image

    collection = Collection.objects.create(name="openimages with models")
    with open(shared_photos / "credits.csv", newline="", encoding="utf-8") as fh:
        credits = list(csv.DictReader(fh))[:6]
    for i, row in enumerate(credits):
        image = Image(collection=collection, external_id=row["ImageID"])
        store_image_file(image, verify_image((shared_photos / f"{row['ImageID']}.jpg").read_bytes()))
        image.save()
        Caption.objects.create(image=image, text=CC_ALT_TEXTS[i % 3], origin="alt_text")
    return collection


def test_the_preset_labels_images_before_the_label_overlap_and_checks_unsafe_content():
    steps = steps_of("conceptual-captions")
    assert steps.index("image_labels") < steps.index("label_overlap")
    assert "unsafe_content" in steps


def test_with_a_model_label_overlap_decides_keep_or_drop_for_every_caption(tiny_clip, photo_collection):
    run = run_preset(photo_collection, "conceptual-captions", unsafe_content={"max_unsafe": 1.0})
    assert run.status == FilterRun.Status.DONE, run.error
    labels = FilterDecision.objects.filter(run=run, filter_name="image_labels")
    assert labels.count() == 6 and {d.reason for d in labels} == {"labelled"}
    assert all(d.details["model"] == tiny_clip.key for d in labels)
    overlap = FilterDecision.objects.filter(run=run, filter_name="label_overlap")
    assert overlap.exists(), "no caption reached label_overlap"
    assert {d.outcome for d in overlap} <= {"keep", "drop"}
    for decision in overlap:  # compared with the labels image_labels gave the caption's image
        predicted = Image.objects.get(pk=decision.image_id).metadata["predicted_labels"]
        assert decision.details["labels"] == [entry["label"] for entry in predicted["labels"]]
    unsafe = FilterDecision.objects.filter(run=run, filter_name="unsafe_content")
    assert {d.details["checker"] for d in unsafe} == {"zero_shot"} and {d.reason for d in unsafe} == {"safe"}
    assert step_notes(run) == {}


def test_without_a_model_the_run_page_says_which_stages_were_not_run(models_dir, photo_collection, alice_client):
    run = run_preset(photo_collection, "conceptual-captions")
    assert run.status == FilterRun.Status.DONE, run.error
    position = {step["filter"]: i for i, step in enumerate(run.snapshot)}
    notes = step_notes(run)
    assert notes[position["image_labels"]] == NOT_RUN and notes[position["unsafe_content"]] == NOT_RUN
    assert "image_labels was not run" in notes[position["label_overlap"]]
    overlap = FilterDecision.objects.filter(run=run, filter_name="label_overlap")
    assert overlap.exists() and {d.outcome for d in overlap} == {"na"}
    page = alice_client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count(NOT_RUN) >= 2 and "image_labels was not run" in html
