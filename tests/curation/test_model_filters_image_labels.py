"""Zero-shot image labels with the tiny CLIP (random weights: the labels mean nothing, the mechanics do) on the
real photos in ../shared/data: the top labels with scores from Open Images' boxable classes, the model key in
every decision, labels kept on the image, imported labels first, an undecodable file reported while the others
are labelled, no model registered, and a bad vocabulary refused when the pipeline is saved."""
import hashlib
import io

import pytest
from django.core.files.base import ContentFile
from PIL import Image as PILImage

from curation.models import Collection, Image
from curation.pipeline.base import KEEP, NA, Item
from curation.pipeline.executor import PipelineError, validate_steps
from curation.pipeline.zero_shot import ImageLabels, default_vocabulary, label_name

pytestmark = pytest.mark.django_db


def store(collection, data: bytes, name: str, metadata=None) -> Image:
    image = Image(collection=collection, external_id=name, metadata=metadata or {},
                  sha256=hashlib.sha256(data + name.encode()).hexdigest())
    try:
        with PILImage.open(io.BytesIO(data)) as probe:
            image.format, image.width, image.height = probe.format, probe.width, probe.height
    except Exception:  # noqa: BLE001 - the undecodable file is stored as it came
        image.format = "JPEG"
    image.file.save(f"{name}.jpg", ContentFile(data), save=False)
    image.save()
    return image


def item_of(image: Image) -> Item:
    metadata = dict(image.metadata or {})
    return Item(caption_id=None, image_id=image.pk, raw_text="", text="", image_format=image.format,
                width=image.width, height=image.height, image_status=image.status, file_name=image.file.name,
                labels=[], metadata=metadata)


@pytest.fixture
def photos(shared_photos):
    collection = Collection.objects.create(name="labelled photos")
    return [store(collection, path.read_bytes(), f"p{i}") for i, path in enumerate(sorted(shared_photos.glob("*.jpg"))[:4])]


def test_the_default_vocabulary_is_open_images_boxable_classes_with_a_licence_note():
    vocabulary = default_vocabulary()
    assert len(vocabulary) == 601 and vocabulary[0] == "Accordion" and vocabulary[-1] == "Zucchini"
    from curation.pipeline import zero_shot

    note = (zero_shot.VOCABULARY_FILE.parent / "openimages_boxable.LICENSE.md").read_text()
    assert "CC BY 4.0" in note and "Google" in note
    # A qualifier only disambiguates the prompt: "animal" would otherwise match any caption about animals.
    assert label_name("Bat (Animal)") == "bat" and label_name("Human face") == "human face"


def test_each_photo_gets_its_top_labels_with_scores_and_the_model_key(tiny_clip, photos):
    items = [item_of(im) for im in photos]
    decisions = ImageLabels({"top_k": 5}).apply(items)
    names = {label_name(entry) for entry in default_vocabulary()}
    for item, decision in zip(items, decisions):
        assert decision.outcome == KEEP and decision.reason == "labelled"
        assert decision.details["model"] == tiny_clip.key and decision.details["vocabulary"] == "openimages_boxable"
        labels = decision.details["labels"]
        assert len(labels) == 5 and {entry["label"] for entry in labels} <= names
        scores = [entry["score"] for entry in labels]
        assert scores == sorted(scores, reverse=True) and decision.score == scores[0]
        assert item.labels == [entry["label"] for entry in labels]  # what label_overlap reads next


def test_the_predicted_labels_are_kept_on_the_image_for_its_page_and_api(tiny_clip, photos):
    ImageLabels({"top_k": 3}).apply([item_of(photos[0])])
    stored = Image.objects.get(pk=photos[0].pk).metadata["predicted_labels"]
    assert stored["model"] == tiny_clip.key and len(stored["labels"]) == 3
    assert set(stored["labels"][0]) == {"label", "score"}


def test_a_custom_vocabulary_top_k_and_min_score_shape_the_labels(tiny_clip, photos):
    flt = ImageLabels({"vocabulary": ["dog", " Dog ", "cat", "", "red car"], "top_k": 2})
    assert flt.names == ["dog", "cat", "red car"]  # cleaned: blanks and repeats out
    decision = flt.apply([item_of(photos[0])])[0]
    assert len(decision.details["labels"]) == 2 and decision.details["vocabulary"] == "custom"
    none_left = ImageLabels({"vocabulary": ["dog", "cat"], "min_score": 1.0}).apply([item_of(photos[0])])[0]
    assert none_left.outcome == KEEP and none_left.details["labels"] == []


def test_labels_imported_with_the_image_take_precedence(tiny_clip, photos):
    collection = photos[0].collection
    imported = store(collection, b"", "imported", metadata={"labels": ["beach", "surfboard"]})
    item = item_of(imported)
    item.labels = ["beach", "surfboard"]
    decision = ImageLabels().apply([item])[0]
    assert (decision.outcome, decision.reason) == (KEEP, "imported_labels")
    assert item.labels == ["beach", "surfboard"]


def test_an_undecodable_image_is_not_applicable_with_the_reason_and_the_others_are_labelled(tiny_clip, photos):
    broken = store(photos[0].collection, b"\xff\xd8\xff\xe0 this is not a jpeg at all", "broken")
    decisions = ImageLabels().apply([item_of(photos[0]), item_of(broken), item_of(photos[1])])
    assert [d.outcome for d in decisions] == [KEEP, NA, KEEP]
    assert decisions[1].reason == "undecodable" and "decode" in decisions[1].details["error"]
    assert decisions[1].details["model"] == tiny_clip.key


def test_without_a_registered_model_every_image_is_not_applicable_and_says_so(models_dir, photos):
    decisions = ImageLabels().apply([item_of(im) for im in photos])
    for decision in decisions:
        assert (decision.outcome, decision.reason) == (NA, "no_model_registered")
        assert decision.details["note"] == "not run: no model registered"


def test_an_unknown_model_name_is_not_applicable_naming_it(tiny_clip, photos):
    decision = ImageLabels({"model": "no-such-clip"}).apply([item_of(photos[0])])[0]
    assert (decision.outcome, decision.reason) == (NA, "no_model_registered")
    assert "no-such-clip" in decision.details["note"]


@pytest.mark.parametrize("params,message", [
    ({"vocabulary": ["", "   "]}, "vocabulary has no labels"),
    ({"vocabulary": "dog\n\n"}, None),  # a newline-separated string is accepted
    ({"vocabulary": [3, 4]}, "must be a list of strings"),
    ({"prompt_template": "a photo"}, "prompt_template"),
    ({"top_k": 0}, "top_k"),
])
def test_a_bad_vocabulary_or_parameter_is_refused_when_the_pipeline_is_saved(params, message):
    steps = [{"filter": "image_labels", "params": params}]
    if message is None:
        assert validate_steps(steps)[0]["params"]["vocabulary"] == "dog\n\n"
        return
    with pytest.raises(PipelineError, match=message):
        validate_steps(steps)
