"""The unsafe-content check: zero-shot with the registered CLIP model against editable unsafe and safe prompts
(an image that matches an unsafe prompt is dropped, one that matches a safe prompt kept, with the model key
and the precision note in the decision), a classifier named in settings still used first, old imports kept,
an undecodable photo reported, no model registered, and bad prompt sets refused when the pipeline is saved."""
import hashlib

import pytest
from django.core.files.base import ContentFile

from curation.models import Collection, Image
from curation.pipeline import image_filters, unsafe
from curation.pipeline.base import DROP, KEEP, NA, Item
from curation.pipeline.executor import PipelineError, validate_steps
from curation.pipeline.unsafe import UnsafeContent
from pack.embeddings.store import to_bytes
from pack.models import ImageEmbedding

pytestmark = pytest.mark.django_db

UNSAFE, SAFE = "a dog runs on the beach", "a plate of food on a table"  # stand-ins the tiny CLIP tells apart


class FlagsEverything(unsafe.UnsafeContentChecker):
    name = "flags-all"

    def check(self, items):
        return [(True, 0.99, "flagged") for _ in items]


def item_of(image: Image) -> Item:
    return Item(caption_id=None, image_id=image.pk, raw_text="", text="", image_format=image.format,
                width=image.width, height=image.height, image_status=image.status, file_name=image.file.name or "")


def stored(collection, data: bytes, name: str) -> Image:
    image = Image(collection=collection, external_id=name, format="JPEG", sha256=hashlib.sha256(data).hexdigest())
    image.file.save(f"{name}.jpg", ContentFile(data), save=False)
    image.save()
    return image


@pytest.fixture
def photos(shared_photos):
    collection = Collection.objects.create(name="screened photos")
    return [stored(collection, p.read_bytes(), f"s{i}") for i, p in enumerate(sorted(shared_photos.glob("*.jpg"))[:3])]


def test_the_old_imports_from_image_filters_still_work():
    assert image_filters.UnsafeContent is UnsafeContent
    assert image_filters.UnsafeContentChecker is unsafe.UnsafeContentChecker
    assert image_filters.NoOpChecker is unsafe.NoOpChecker and image_filters.load_checker is unsafe.load_checker


def test_the_zero_shot_check_scores_real_photos_with_the_model_and_states_its_limits(tiny_clip, photos):
    decisions = UnsafeContent().apply([item_of(im) for im in photos])
    for decision in decisions:
        assert decision.outcome in (KEEP, DROP) and 0 <= decision.score <= 1
        assert decision.details["checker"] == "zero_shot" and decision.details["model"] == tiny_clip.key
        assert "unmeasured precision" in decision.details["note"]
    assert "precision and recall are not measured" in UnsafeContent.description
    strict = UnsafeContent({"max_unsafe": 1e-6}).apply([item_of(photos[0])])[0]
    assert (strict.outcome, strict.reason) == (DROP, "unsafe")


def test_an_image_matching_an_unsafe_prompt_is_dropped_and_one_matching_a_safe_prompt_is_kept(tiny_clip):
    from pack.embeddings import text_vectors

    collection = Collection.objects.create(name="planted vectors")
    prompts = text_vectors(tiny_clip, [UNSAFE, SAFE])
    images = []
    for i, vector in enumerate(prompts):  # an image whose vector is the prompt's own
        image = Image.objects.create(collection=collection, external_id=f"u{i}", file=f"images/u{i}.jpg",
                                     sha256=hashlib.sha256(b"u%d" % i).hexdigest())
        ImageEmbedding.objects.create(model=tiny_clip, image=image, collection=collection, dim=len(vector),
                                      vector=to_bytes(vector))
        images.append(image)
    flt = UnsafeContent({"unsafe_prompts": [UNSAFE], "safe_prompts": [SAFE]})
    flagged, clean = flt.apply([item_of(im) for im in images])
    assert (flagged.outcome, flagged.reason, flagged.details["nearest_prompt"]) == (DROP, "unsafe", UNSAFE)
    assert (clean.outcome, clean.reason, clean.details["nearest_prompt"]) == (KEEP, "safe", SAFE)
    assert flagged.score > 0.5 > clean.score


def test_a_classifier_named_in_settings_is_used_first_unless_the_zero_shot_method_is_asked_for(
        settings, tiny_clip, photos):
    settings.CURATION_UNSAFE_CHECKER = f"{__name__}.FlagsEverything"
    assert {d.details["checker"] for d in UnsafeContent().apply([item_of(im) for im in photos])} == {"flags-all"}
    zero_shot = UnsafeContent({"method": "zero_shot"}).apply([item_of(photos[0])])[0]
    assert zero_shot.details["checker"] == "zero_shot"
    settings.CURATION_UNSAFE_CHECKER = None
    noop = UnsafeContent({"method": "checker"}).apply([item_of(photos[0])])[0]
    assert (noop.outcome, noop.reason, noop.details["checker"]) == (NA, "check_not_run", "noop")


def test_an_undecodable_photo_is_not_applicable_and_the_others_are_checked(tiny_clip, photos):
    broken = stored(photos[0].collection, b"\xff\xd8\xff garbage", "broken")
    decisions = UnsafeContent().apply([item_of(photos[0]), item_of(broken)])
    assert decisions[0].outcome in (KEEP, DROP)
    assert (decisions[1].outcome, decisions[1].reason) == (NA, "undecodable") and decisions[1].details["error"]


def test_without_a_model_or_a_classifier_every_image_says_it_was_not_run(models_dir, photos):
    for decision in UnsafeContent().apply([item_of(im) for im in photos]):
        assert (decision.outcome, decision.reason) == (NA, "no_model_registered")
        assert decision.details["note"] == "not run: no model registered"
        assert "CURATION_UNSAFE_CHECKER" in decision.details["help"]


@pytest.mark.parametrize("params,message", [
    ({"unsafe_prompts": ["", " "]}, "at least one unsafe and one safe prompt"),
    ({"safe_prompts": []}, "at least one unsafe and one safe prompt"),
    ({"max_unsafe": 0}, "max_unsafe"),
    ({"method": "nudenet"}, "method"),
])
def test_a_bad_prompt_set_or_threshold_is_refused_when_the_pipeline_is_saved(params, message):
    with pytest.raises(PipelineError, match=message):
        validate_steps([{"filter": "unsafe_content", "params": params}])
