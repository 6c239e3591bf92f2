"""Image filters of Conceptual Captions on the real photos in ../shared/data/openimages-cc-by/:
format, minimum side, aspect ratio, decodability (truncated and replaced files), exact and near
duplicates (a resized, re-encoded copy of a photo), and the pluggable unsafe-content check."""
import hashlib
import io
import json
import random

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from PIL import Image as PILImage

from curation.models import Collection, Image
from curation.pipeline import registry
from curation.pipeline.base import DROP, KEEP, NA, Item
from curation.pipeline.image_filters import (
    AspectRatio,
    Decodable,
    ExactDuplicate,
    ImageFormat,
    ImageSize,
    NearDuplicate,
    NoOpChecker,
    UnsafeContent,
    UnsafeContentChecker,
    hamming,
    phash_file,
)
from curation.pipeline.phash_groups import HashIndex

pytestmark = pytest.mark.django_db

IMAGE_FILTERS = ["image_format", "image_size", "aspect_ratio", "decodable", "exact_duplicate", "near_duplicate",
                 "unsafe_content"]


# --- Builders ---------------------------------------------------------------------------------------

def store(collection: Collection, data: bytes, name: str = "photo") -> Image:
    """An Image row with its file in storage, as ingest makes them (sha256, format, size from the bytes)."""
    with PILImage.open(io.BytesIO(data)) as probe:
        fmt, width, height = probe.format, probe.width, probe.height
    image = Image(collection=collection, format=fmt, width=width, height=height, file_size=len(data),
                  sha256=hashlib.sha256(data).hexdigest(), external_id=name)
    image.file.save(f"{name}.{image.extension}", ContentFile(data), save=False)
    image.save()
    return image


def item_of(image: Image) -> Item:
    return Item(caption_id=None, image_id=image.pk, raw_text="", text="", image_format=image.format or None,
                width=image.width, height=image.height, sha256=image.sha256, phash=image.phash or None,
                image_status=image.status, file_name=image.file.name or "")


def reencode(data: bytes, fmt: str = "JPEG", scale: float = 1.0, crop: tuple | None = None, **save) -> bytes:
    with PILImage.open(io.BytesIO(data)) as img:
        img = img.convert("RGB")
        if crop:
            img = img.crop(crop)
        if scale != 1.0:
            img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), PILImage.LANCZOS)
        out = io.BytesIO()
        img.save(out, fmt, **save)
        return out.getvalue()


def rows_of(images: list[Image], **extra) -> list[dict]:
    return [{"caption_id": None, "image_id": im.pk, "text": "", "entity_types": [], "sha256": im.sha256,
             "phash": im.phash or None, "score": None, **extra} for im in images]


@pytest.fixture
def collection():
    return Collection.objects.create(name="web photos")


@pytest.fixture
def photo_bytes(shared_photos) -> list[bytes]:
    return [path.read_bytes() for path in sorted(shared_photos.glob("*.jpg"))]


@pytest.fixture
def photos(collection, photo_bytes) -> list[Image]:
    return [store(collection, data, f"p{i}") for i, data in enumerate(photo_bytes)]


# --- The units ----------------------------------------------------------------------------------------

def test_every_image_filter_is_registered_with_a_version_defaults_and_the_image_target():
    for name in IMAGE_FILTERS:
        cls = registry.get(name)
        assert cls.target == "image" and cls.version >= 1 and cls.label and cls.description
        json.dumps(cls.defaults)  # parameters are stored as JSON on the pipeline
    assert registry.get("exact_duplicate").run_level and registry.get("near_duplicate").run_level
    assert ImageFormat.defaults == {"formats": ["JPEG"]}
    assert ImageSize.defaults == {"min_side": 400} and AspectRatio.defaults == {"max_ratio": 2.0}
    assert NearDuplicate.defaults["max_distance"] == 4


def test_an_unknown_parameter_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="min_side"):
        ImageSize({"min_sides": 300})


# --- Format, size, aspect ratio --------------------------------------------------------------------------

def test_the_real_jpeg_photos_pass_format_size_and_aspect_with_their_real_dimensions(photos):
    items = [item_of(im) for im in photos]
    formats, sizes, ratios = ImageFormat().apply(items), ImageSize().apply(items), AspectRatio().apply(items)
    for image, fmt, size, ratio in zip(photos, formats, sizes, ratios):
        assert (fmt.outcome, fmt.details["format"]) == (KEEP, "JPEG")
        assert size.outcome == KEEP and size.score == min(image.width, image.height) > 400
        assert ratio.outcome == KEEP
        assert ratio.score == pytest.approx(max(image.width, image.height) / min(image.width, image.height), abs=1e-3)


def test_a_png_copy_is_dropped_as_the_paper_keeps_only_jpeg_unless_the_curator_allows_png(collection, photo_bytes):
    png = store(collection, reencode(photo_bytes[0], "PNG"), "png-copy")
    assert png.format == "PNG"
    decision = ImageFormat().apply([item_of(png)])[0]
    assert (decision.outcome, decision.reason, decision.details["format"]) == (DROP, "format_not_allowed", "PNG")
    assert ImageFormat({"formats": ["JPEG", "PNG"]}).apply([item_of(png)])[0].outcome == KEEP


def test_a_downscaled_copy_is_too_small_and_a_side_of_exactly_the_minimum_is_not_greater(collection, photo_bytes):
    small = store(collection, reencode(photo_bytes[1], scale=0.5), "half")
    exact = store(collection, reencode(photo_bytes[1], crop=(0, 0, 400, 420)), "exact")
    small_d, exact_d = ImageSize().apply([item_of(small), item_of(exact)])
    assert (small_d.outcome, small_d.reason, small_d.score) == (DROP, "too_small", min(small.width, small.height))
    assert (exact_d.outcome, exact_d.score) == (DROP, 400)  # "greater than 400 pixels"
    assert ImageSize({"min_side": min(small.width, small.height) - 1}).apply([item_of(small)])[0].outcome == KEEP


def test_a_panorama_crop_is_dropped_for_its_aspect_ratio_with_the_ratio_as_score(collection, photo_bytes):
    with PILImage.open(io.BytesIO(photo_bytes[0])) as img:
        width = img.width
    strip = store(collection, reencode(photo_bytes[0], crop=(0, 0, width, width // 3)), "strip")
    decision = AspectRatio().apply([item_of(strip)])[0]
    assert (decision.outcome, decision.reason) == (DROP, "bad_aspect_ratio")
    assert decision.score == pytest.approx(width / (width // 3), abs=1e-3)
    assert AspectRatio({"max_ratio": 3.5}).apply([item_of(strip)])[0].outcome == KEEP


def test_dimensions_missing_from_the_row_are_read_from_the_file(collection, photo_bytes):
    image = store(collection, photo_bytes[2], "no-dims")
    item = item_of(image)
    item.width = item.height = item.image_format = None
    assert ImageSize().apply([item])[0].score == min(image.width, image.height)
    assert ImageFormat().apply([item])[0].details["format"] == "JPEG"


def test_an_image_without_a_file_is_dropped_as_no_file_by_the_per_image_checks(collection):
    pending = Image.objects.create(collection=collection, status=Image.Status.PENDING, source_url="http://x/y.jpg")
    item = item_of(pending)
    for flt in (ImageFormat(), ImageSize(), AspectRatio(), Decodable()):
        decision = flt.apply([item])[0]
        assert (decision.outcome, decision.reason) == (DROP, "no_file"), flt.name
    assert NearDuplicate().apply([item])[0].outcome == NA
    assert UnsafeContent().apply([item])[0].reason == "no_file"


# --- Decodability ------------------------------------------------------------------------------------------

def test_a_real_photo_decodes_and_its_perceptual_hash_is_recorded_and_cached(photos):
    decision = Decodable().apply([item_of(photos[0])])[0]
    assert (decision.outcome, decision.reason) == (KEEP, "decodes")
    assert len(decision.details["phash"]) == 16
    photos[0].refresh_from_db()
    assert photos[0].phash == decision.details["phash"]


def test_a_truncated_jpeg_is_dropped_as_undecodable_with_pillows_error(collection, photo_bytes):
    data = photo_bytes[3]
    truncated = store(collection, data, "truncated")
    with default_storage.open(truncated.file.name, "wb") as fh:  # as if cut short on disk after import
        fh.write(data[: len(data) // 2])
    decision = Decodable({"verify_sha256": False}).apply([item_of(truncated)])[0]
    assert (decision.outcome, decision.reason) == (DROP, "undecodable")
    assert "truncated" in decision.details["error"].lower()


def test_a_file_replaced_after_import_is_caught_by_its_sha256_and_garbage_does_not_decode(collection, photo_bytes):
    image = store(collection, photo_bytes[4], "replaced")
    with default_storage.open(image.file.name, "wb") as fh:
        fh.write(b"\xff\xd8\xff\xe0 not a jpeg any more" * 20)
    changed = Decodable().apply([item_of(image)])[0]
    assert (changed.outcome, changed.reason, changed.details["expected"]) == (DROP, "file_changed", image.sha256)
    garbage = Decodable({"verify_sha256": False}).apply([item_of(image)])[0]
    assert (garbage.outcome, garbage.reason) == (DROP, "undecodable")
    assert garbage.details["error"]


def test_a_file_deleted_from_storage_is_dropped_as_no_file_not_a_crash(collection, photo_bytes):
    image = store(collection, photo_bytes[5], "deleted")
    default_storage.delete(image.file.name)
    decision = Decodable().apply([item_of(image)])[0]
    assert (decision.outcome, decision.reason) == (DROP, "no_file")
    assert "error" in decision.details


# --- Duplicates ---------------------------------------------------------------------------------------------

def test_a_resized_reencoded_copy_is_a_near_duplicate_and_a_different_photo_is_far(collection, photo_bytes):
    original = store(collection, photo_bytes[0], "original")
    copy = store(collection, reencode(photo_bytes[0], scale=0.6, quality=70), "copy")
    other = store(collection, photo_bytes[1], "other")
    a, b, c = (phash_file(im.file.name) for im in (original, copy, other))
    assert hamming(a, b) <= 4 < 16 < hamming(a, c)

    decisions = NearDuplicate().decide_run(rows_of([original, copy, other]))
    assert {k: d.outcome for k, d in decisions.items()} == {original.pk: KEEP, copy.pk: DROP, other.pk: KEEP}
    dup = decisions[copy.pk]
    assert (dup.outcome, dup.reason, dup.details["of"]) == (DROP, "near_duplicate_of", original.pk)
    assert dup.score == dup.details["distance"] == hamming(a, b)


def test_near_duplicates_hash_in_apply_from_the_file_when_no_hash_is_cached(collection, photo_bytes):
    original = store(collection, photo_bytes[6], "original")
    copy = store(collection, reencode(photo_bytes[6], scale=0.5, quality=60), "copy")
    flt = NearDuplicate()
    kept, dropped = flt.apply([item_of(original), item_of(copy)])
    assert kept.outcome == KEEP and len(kept.details["phash"]) == 16
    assert (dropped.outcome, dropped.reason, dropped.details["of"]) == (DROP, "near_duplicate_of", original.pk)
    original.refresh_from_db()
    assert original.phash == kept.details["phash"]  # Image.phash is filled as a cache


def test_near_duplicates_over_a_run_hash_the_images_no_earlier_step_hashed(collection, photo_bytes):
    original = store(collection, photo_bytes[7], "original")
    copy = store(collection, reencode(photo_bytes[7], scale=0.7, quality=80), "copy")
    decisions = NearDuplicate().decide_run(rows_of([original, copy], phash=None))
    assert decisions[copy.pk].details["of"] == original.pk


def test_the_hash_index_finds_exactly_what_a_pairwise_comparison_finds():
    rng = random.Random(7)
    hashes = {}
    for key in range(1500):
        if key % 3 == 0 and key:  # a near copy of an earlier hash
            base = hashes[rng.randrange(key)]
            flips = rng.sample(range(64), rng.randrange(0, 9))
            hashes[key] = base ^ sum(1 << b for b in flips)
        else:
            hashes[key] = rng.getrandbits(64)
    for max_distance in (0, 4, 8, 64):
        index, brute_kept = HashIndex(64, max_distance), []
        for key, value in hashes.items():
            found = index.nearest(value)
            near = [(bin(value ^ hashes[k]).count("1"), k) for k in brute_kept]
            near = [(d, k) for d, k in near if d <= max_distance]
            expected = min(near) if near else None
            assert (found[1], found[0]) == expected if found else expected is None
            if not found:
                index.add(key, value)
                brute_kept.append(key)


def test_an_identical_file_already_in_another_collection_drops_the_later_copy(collection, photo_bytes):
    first = store(collection, photo_bytes[8], "first")
    later_collection = Collection.objects.create(name="re-import")
    again = store(later_collection, photo_bytes[8], "again")
    fresh = store(later_collection, photo_bytes[9], "fresh")
    decisions = ExactDuplicate().decide_run(rows_of([again, fresh]))
    assert (decisions[again.pk].outcome, decisions[again.pk].reason) == (DROP, "duplicate_of")
    assert decisions[again.pk].details == {"of": first.pk, "collection": collection.pk, "sha256": first.sha256}
    assert (decisions[fresh.pk].outcome, decisions[fresh.pk].reason) == (KEEP, "first_copy")
    alone = ExactDuplicate({"across_collections": False}).decide_run(rows_of([again, fresh]))
    assert {d.outcome for d in alone.values()} == {KEEP}


def test_among_the_runs_own_images_the_lowest_id_of_each_sha256_is_kept():
    rows = [{"image_id": i, "sha256": sha} for i, sha in [(5, "a" * 64), (3, "a" * 64), (4, "b" * 64), (9, "a" * 64)]]
    decisions = ExactDuplicate({"across_collections": False}).decide_run(rows)
    assert {k: d.details["of"] for k, d in decisions.items() if d.outcome == DROP} == {5: 3, 9: 3}
    assert decisions[3].outcome == decisions[4].outcome == KEEP


# --- Unsafe content --------------------------------------------------------------------------------------

class FlagsWideImages(UnsafeContentChecker):
    """A stand-in classifier for the tests: "unsafe" means wider than tall."""

    name = "wide"

    def check(self, items):
        return [(it.width > it.height, round(it.width / it.height, 2), "wide" if it.width > it.height else "tall")
                for it in items]


class Broken(UnsafeContentChecker):
    name = "broken"

    def check(self, items):
        raise RuntimeError("classifier service unavailable")


def test_the_default_checker_says_it_did_not_run_instead_of_keeping_silently(photos):
    assert isinstance(NoOpChecker(), UnsafeContentChecker)
    decisions = UnsafeContent().apply([item_of(im) for im in photos[:3]])
    for decision in decisions:
        # No checker configured and no CLIP model registered (issue 21: the zero-shot check needs one).
        assert (decision.outcome, decision.reason, decision.details["checker"]) == (NA, "no_model_registered", "zero_shot")
        assert "CURATION_UNSAFE_CHECKER" in decision.details["help"]


def test_a_checker_named_in_settings_decides_and_a_score_threshold_can_overrule_it(settings, photos):
    settings.CURATION_UNSAFE_CHECKER = f"{__name__}.FlagsWideImages"
    items = [item_of(im) for im in photos]
    for image, decision in zip(photos, UnsafeContent().apply(items)):
        assert decision.details["checker"] == "wide"
        assert decision.outcome == (DROP if image.width > image.height else KEEP)
        assert decision.reason == ("unsafe" if image.width > image.height else "safe")
    tall = [it for it in items if it.width < it.height]
    assert all(d.outcome == DROP for d in UnsafeContent({"max_score": 0.5}).apply(tall))


def test_a_failing_checker_marks_each_image_check_failed_and_a_bad_path_is_a_configuration_error(settings, photos):
    settings.CURATION_UNSAFE_CHECKER = f"{__name__}.Broken"
    decision = UnsafeContent().apply([item_of(photos[0])])[0]
    assert (decision.outcome, decision.reason) == (NA, "check_failed")
    assert "unavailable" in decision.details["error"]
    settings.CURATION_UNSAFE_CHECKER = "no.such.Checker"
    with pytest.raises(ImproperlyConfigured, match="no.such.Checker"):
        UnsafeContent().apply([item_of(photos[0])])


@pytest.mark.parametrize("cls,params", [
    (ImageSize, {"min_side": "400"}), (AspectRatio, {"max_ratio": 0.5}), (NearDuplicate, {"max_distance": -1}),
    (NearDuplicate, {"hash_size": 16}), (ImageFormat, {"formats": "JPEG"}),
])
def test_a_parameter_that_would_fail_every_chunk_is_refused_when_the_pipeline_is_saved(cls, params):
    with pytest.raises(ValueError, match=next(iter(params))):
        cls(params)


def test_the_paper_image_steps_run_through_the_executor_and_each_bad_image_stops_at_its_step(
        collection, photo_bytes, monkeypatch):
    from curation.models import FilterDecision, FilterRun, Pipeline, RunChunk
    from curation.pipeline import executor
    from curation.services import run_create

    originals = [store(collection, data, f"p{i}") for i, data in enumerate(photo_bytes[:4])]
    copy = store(collection, reencode(photo_bytes[0], scale=0.9, quality=75), "copy")
    cut = store(collection, reencode(photo_bytes[5], quality=90), "cut")
    with default_storage.open(cut.file.name, "rb") as fh:
        data = fh.read()
    with default_storage.open(cut.file.name, "wb") as fh:  # cut short on disk after import
        fh.write(data[: len(data) // 3])
    steps = ["image_format", "image_size", "aspect_ratio", "decodable", "unsafe_content", "exact_duplicate",
             "near_duplicate"]
    pipeline = Pipeline.objects.create(name="images", steps=[{"filter": name} for name in steps])
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 2)
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    assert run.status == FilterRun.Status.DONE, run.error
    dropped = {(d.image_id, d.filter_name, d.reason) for d in FilterDecision.objects.filter(run=run, outcome=DROP)}
    assert dropped == {(cut.pk, "decodable", "file_changed"), (copy.pk, "near_duplicate", "near_duplicate_of")}
    near = FilterDecision.objects.get(run=run, image=copy, filter_name="near_duplicate")
    assert near.details["of"] == originals[0].pk
    unsafe = FilterDecision.objects.filter(run=run, filter_name="unsafe_content")
    assert {d.reason for d in unsafe} == {"no_model_registered"} and unsafe.count() == 5
    funnel = {row["filter"]: row for row in run.funnel}
    assert funnel["near_duplicate"]["entered"] == 5 and funnel["near_duplicate"]["dropped"] == 1


def test_an_image_over_the_pixel_limit_is_refused_not_decoded(collection, photo_bytes, monkeypatch):
    image = store(collection, photo_bytes[10], "huge")
    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", 10_000)  # the real photo is now "too big"
    decision = Decodable().apply([item_of(image)])[0]
    assert (decision.outcome, decision.reason) == (DROP, "too_many_pixels")
