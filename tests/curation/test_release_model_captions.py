"""Model-generated captions in releases: left out by default, included only when asked (config, form,
API, CLI), and even then never in the test split, with the reason in the report and the card."""
from __future__ import annotations

import pytest
from django.core.management import call_command

from curation.models import Caption
from releases.freeze import freeze, validate_config
from releases.models import Release, ReleaseItem

from .release_helpers import add_caption, cc_collection, finished_run, make_release, transformed

pytestmark = pytest.mark.django_db

SPLITS = {"train": 0.5, "val": 0.0, "test": 0.5}


def generated_collection(n=12):
    """``n`` images with a web caption and a captioner's caption each, and two images that only a
    captioner described (as after ``generate_captions`` on a collection)."""
    collection, images = cc_collection("generated", n_images=n)
    for image in images:
        add_caption(image, "a model wrote this", origin=Caption.Origin.MODEL, source="model captioner v1",
                    metadata={"model_version": 1, "version": 1})
    for image in images[:2]:
        image.captions.exclude(origin=Caption.Origin.MODEL).delete()
    return collection, images


def origins_by_split(release) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for item in ReleaseItem.objects.filter(release=release):
        out.setdefault(item.split, set()).add(item.provenance["origin"])
    return out


def test_a_release_leaves_model_captions_out_by_default():
    collection, images = generated_collection()
    release = freeze(make_release("default", collections=[collection.pk], splits=SPLITS))
    assert Caption.objects.filter(origin="model").count() == len(images)
    assert all("model" not in origins for origins in origins_by_split(release).values())
    assert release.items_total == len(images) - 2  # the two images only a model described are not in it
    excluded = [e for e in release.report if e["code"] == "model_captions_excluded"]
    assert excluded and excluded[0]["captions"] == len(images)
    assert release.config["include_model_captions"] is False


def test_model_captions_asked_for_are_never_test_references():
    collection, images = generated_collection()
    release = freeze(make_release("with-model", collections=[collection.pk], splits=SPLITS,
                                  include_model_captions=True))
    by_split = origins_by_split(release)
    assert by_split["test"] == {"alt_text"}  # the test split keeps its human references, and only those
    assert "model" in by_split["train"]
    only_model = {images[0].pk, images[1].pk}
    test_images = set(release.items.filter(split="test").values_list("image_id", flat=True))
    assert test_images and not test_images & only_model  # an image without a human reference is never a test image
    dropped = [e for e in release.report if e["code"] == "model_captions_out_of_test"]
    assert dropped and dropped[0]["captions"] == len(test_images)
    assert release.items_total == release.items.count() == 2 * len(images) - 2 - len(test_images)
    assert release.counts["total"]["captions"] == release.items_total
    assert "Model-generated captions: included on request, never in the test split" in release.card


def test_a_caption_transformed_from_a_model_caption_counts_as_a_model_caption():
    collection, images = cc_collection("transformed", n_images=2)
    run = finished_run(collection)
    model = add_caption(images[0], "a model wrote this", origin=Caption.Origin.MODEL, source="model captioner v1")
    transformed(run, 2, model, "a model wrote it")
    release = freeze(make_release("transformed", collections=[collection.pk], origins=["transformed", "alt_text"]))
    assert not release.items.filter(text__startswith="a model").exists()


def test_ticking_the_model_origin_is_an_explicit_ask():
    collection, _ = cc_collection("origins", n_images=1)
    assert validate_config({"collections": [collection.pk], "origins": ["model"]})["include_model_captions"] is True
    assert validate_config({"collections": [collection.pk]})["include_model_captions"] is False
    assert validate_config({"collections": [collection.pk], "include_model_captions": "yes"})[
        "include_model_captions"] is True


def test_the_cli_api_and_form_pass_the_option(alice, alice_client):
    collection, images = generated_collection(n=4)
    call_command("release", "create", "--name", "cli", "--collections", str(collection.pk),
                 "--include-model-captions", "--splits", "1,0,0", "--freeze", stdout=open("/dev/null", "w"))
    cli = Release.objects.get(name="cli")
    assert cli.config["include_model_captions"] is True and cli.items.filter(caption__origin="model").exists()

    response = alice_client.post("/api/releases/", {"name": "api", "config": {
        "collections": [collection.pk], "include_model_captions": True}}, content_type="application/json")
    assert response.status_code in (200, 201), response.content
    assert Release.objects.get(name="api").config["include_model_captions"] is True

    from releases.views import ReleaseForm

    form = ReleaseForm(data={"name": "form", "collections": [collection.pk], "dedup": "sha256", "split_train": 1,
                             "split_val": 0, "split_test": 0, "seed": 0, "missing_image": "skip",
                             "include_model_captions": "on"})
    assert form.is_valid(), form.errors
    assert form.config()["include_model_captions"] is True
