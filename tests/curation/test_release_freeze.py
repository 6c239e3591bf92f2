"""Freezing releases: selection (run with overrides, vote rules, origins, caps, dedup), splits by
image, provenance, the content hash and card, and bad input (empty selection, missing images,
frozen releases)."""
from __future__ import annotations

import io

import pytest
from django.core.files.storage import default_storage
from PIL import Image as PILImage

from curation.models import Caption, FilterDecision, Image, Review
from releases import ReleaseError
from releases.card import dataset_card, md
from releases.freeze import freeze, validate_config
from releases.models import Release, ReleaseItem
from releases.provenance import content_hash
from releases.splits import quotas

from .release_helpers import (
    CC_EXTRA,
    CC_PAIRS,
    add_caption,
    add_image,
    cc_collection,
    decide,
    finished_run,
    image_bytes,
    make_release,
    rating_campaign,
    transformed,
)

pytestmark = pytest.mark.django_db


def items(release):
    return list(ReleaseItem.objects.filter(release=release).order_by("position"))


def texts(release):
    return [i.text for i in items(release)]


# --- config ------------------------------------------------------------------------------------------

def test_validate_config_normalises_and_names_the_bad_field():
    collection, _ = cc_collection()
    config = validate_config({"collections": [str(collection.pk)], "seed": "7"})
    assert config["collections"] == [collection.pk]
    assert config["seed"] == 7
    assert config["splits"] == {"train": 0.8, "val": 0.1, "test": 0.1}
    assert config["dedup"] == "sha256" and config["missing_image"] == "skip"
    cases = [
        ({}, "collections"),
        ({"collections": []}, "collections"),
        ({"collections": [999999]}, "collections"),
        ({"collections": [collection.pk], "splits": {"train": 0.5, "val": 0.1, "test": 0.1}}, "splits"),
        ({"collections": [collection.pk], "splits": {"train": 1.2, "test": -0.2}}, "splits"),
        ({"collections": [collection.pk], "dedup": "md5"}, "dedup"),
        ({"collections": [collection.pk], "missing_image": "ignore"}, "missing_image"),
        ({"collections": [collection.pk], "origins": ["telepathy"]}, "origins"),
        ({"collections": [collection.pk], "run": 424242}, "run"),
        ({"collections": [collection.pk], "vote_rules": [{"campaign": 1, "rule": "good_9plus"}]}, "vote_rules"),
        ({"collections": [collection.pk], "max_captions_per_image": -1}, "max_captions_per_image"),
        ({"collections": [collection.pk], "colour": "blue"}, "colour"),
    ]
    for config, field in cases:
        with pytest.raises(ReleaseError) as info:
            validate_config(config)
        assert info.value.field == field, (config, info.value.message)
        assert info.value.message


def test_vote_rule_needs_a_matching_campaign_kind():
    collection, images = cc_collection()
    caption = images[0].captions.get()
    fluency = rating_campaign(collection, {caption: ["fluent", "fluent"]}, kind="fluency", name="fl")
    with pytest.raises(ReleaseError) as info:
        validate_config({"collections": [collection.pk], "vote_rules": [{"campaign": fluency.pk,
                                                                          "rule": "good_2plus"}]})
    assert info.value.field == "vote_rules" and "GOOD/BAD" in info.value.message
    ok = validate_config({"collections": [collection.pk], "vote_rules": [{"campaign": fluency.pk, "rule": "fluent"}]})
    assert ok["vote_rules"] == [{"campaign": fluency.pk, "rule": "fluent", "label": None, "method": "consistent"}]


# --- freezing ------------------------------------------------------------------------------------------

def test_freeze_copies_items_with_image_facts_and_card(settings):
    collection, images = cc_collection(n_images=4)
    release = make_release(collections=[collection.pk], seed=3)
    release.description = "Alt-texts from seed 002."
    release.save()
    progress = []
    freeze(release, progress=lambda done, total: progress.append((done, total)))
    release.refresh_from_db()
    assert release.status == Release.Status.FROZEN and release.frozen_at is not None
    rows = items(release)
    assert [r.position for r in rows] == [0, 1, 2, 3]
    assert [r.text for r in rows] == [alt for alt, _ in CC_PAIRS]
    first, image = rows[0], images[0]
    assert (first.image_sha256, first.image_file, first.width, first.height, first.license, first.credit) == (
        image.sha256, image.file.name, image.width, image.height, image.license, image.credit)
    assert first.provenance["lineage"] == [{"caption": image.captions.get().pk, "origin": "alt_text",
                                            "source": "cc.tsv", "text": CC_PAIRS[0][0]}]
    assert release.counts["total"] == {"images": 4, "captions": 4}
    assert sum(release.counts[s]["images"] for s in ("train", "val", "test")) == 4
    assert release.content_hash == content_hash(release) and len(release.content_hash) == 64
    assert progress and progress[-1] == (4, 4)
    card = release.card
    assert "# r1" in card and "Alt\\-texts from seed 002\\." in card
    assert "| total | 4 | 4 |" in card
    assert "regex word tokenizer" in card and release.content_hash in card
    assert "https://creativecommons\\.org/licenses/by/2\\.0/: 4" in card and "sneakerdog (4)" in card
    assert card == dataset_card(release)  # the card from the stored items is the same


def test_card_token_statistics_match_a_hand_count():
    collection = cc_collection(n_images=0)[0]
    lengths = []
    for i, text in enumerate(CC_EXTRA):
        add_caption(add_image(collection, seed=100 + i), text)
        lengths.append(len(text.replace("'s", "s").split()))
    release = make_release(collections=[collection.pk], splits={"train": 1.0, "val": 0, "test": 0})
    freeze(release)
    import statistics

    mean, std, median = statistics.mean(lengths), statistics.pstdev(lengths), statistics.median(lengths)
    assert f"| train | {len(lengths)} | {round(mean, 2):g} | {round(std, 2):g} | {median:g} |" in release.card
    vocab = {w.lower() for t in CC_EXTRA for w in t.split()}
    assert f"Vocabulary size (unique tokens, all splits): {len(vocab)}." in release.card


def test_run_with_overrides_and_transforms():
    collection, images = cc_collection(n_images=4)
    run = finished_run(collection)
    caps = [im.captions.get() for im in images]
    for i, (image, caption) in enumerate(zip(images, caps)):
        decide(run, 0, image, None, "keep", reason="ok")
    # 0: kept at every step and hypernymized; 1: dropped by alt_text_quality, a curator overrode it to keep;
    # 2: kept by the filter, a curator overrode it to drop; 3: image dropped (no caption decisions).
    decide(run, 1, images[0], caps[0], "keep", score=0.91, reason="well_formed")
    decide(run, 2, images[0], caps[0], "keep", reason="hypernymized", text_after=CC_PAIRS[0][1])
    child = transformed(run, 2, caps[0], CC_PAIRS[0][1])
    flipped = decide(run, 1, images[1], caps[1], "drop", score=0.2, reason="stock_boilerplate", override="keep")
    Review.objects.create(decision=flipped, outcome="keep", note="boilerplate is cropped later")
    decide(run, 1, images[2], caps[2], "keep", score=0.8, reason="well_formed", override="drop")
    FilterDecision.objects.filter(run=run, step=0, image=images[3]).update(outcome="drop", reason="too_small")
    # A caption added after the run: the run never saw it, so it is not in the release.
    add_caption(images[0], "a caption added after the run")
    release = make_release(collections=[collection.pk], run=run.pk)
    freeze(release)
    rows = items(release)
    assert [r.text for r in rows] == [CC_PAIRS[0][1], CC_PAIRS[1][0]]
    hyper = rows[0].provenance
    assert hyper["caption"] == child.pk and rows[0].caption_id == child.pk
    assert [n["caption"] for n in hyper["lineage"]] == [child.pk, caps[0].pk]
    assert hyper["lineage"][-1]["text"] == CC_PAIRS[0][0]  # raw text last
    assert [(d["step"], d["filter"], d["version"], d["final"]) for d in hyper["decisions"]] == [
        (0, "image_check", 3, "keep"), (1, "alt_text_quality", 2, "keep"), (2, "hypernymize", 1, "keep")]
    assert hyper["models"] == {"versions": {"spacy": "3.8.18", "fluency-model": "v4"},
                               "scored_by": ["alt_text_quality"]}
    over = rows[1].provenance
    assert over["decisions"][1]["outcome"] == "drop" and over["decisions"][1]["override"] == "keep"
    assert over["overrides"][0]["note"] == "boilerplate is cropped later"


def test_run_must_be_finished_and_over_the_release_collection():
    collection, _ = cc_collection()
    other, _ = cc_collection("other", seed0=50)
    run = finished_run(collection)
    with pytest.raises(ReleaseError) as info:
        validate_config({"collections": [collection.pk, other.pk], "run": run.pk})
    assert info.value.field == "run"
    run.status = "running"
    run.save()
    with pytest.raises(ReleaseError) as info:
        validate_config({"collections": [collection.pk], "run": run.pk})
    assert "not finished" in info.value.message


def test_vote_rules_good_2plus_and_label():
    collection, images = cc_collection(n_images=4)
    caps = [im.captions.get() for im in images]
    campaign = rating_campaign(collection, {caps[0]: ["good", "good", "bad"], caps[1]: ["good", "bad", "bad"],
                                            caps[2]: ["good", "good", "good"]})
    release = make_release(collections=[collection.pk], vote_rules=[{"campaign": campaign.pk, "rule": "good_2plus"}])
    freeze(release)
    rows = items(release)
    assert [r.caption_id for r in rows] == [caps[0].pk, caps[2].pk]
    assert all(r.human_verified for r in rows)
    votes = rows[0].provenance["votes"]
    majority = next(v for v in votes if v["method"] == "majority")
    assert (majority["campaign"], majority["label"], majority["n_votes"]) == (campaign.pk, "good", 3)
    assert rows[0].provenance["rules"] == [{"campaign": campaign.pk, "rule": "good_2plus", "satisfied": True}]

    three = make_release("r3", collections=[collection.pk],
                         vote_rules=[{"campaign": campaign.pk, "rule": "good_3plus"}])
    freeze(three)
    assert [r.caption_id for r in items(three)] == [caps[2].pk]
    bad = make_release("bad", collections=[collection.pk],
                       vote_rules=[{"campaign": campaign.pk, "rule": "label", "label": "bad", "method": "majority"}])
    freeze(bad)
    assert [r.caption_id for r in items(bad)] == [caps[1].pk]


def test_fluent_rule_uses_the_consistent_aggregate():
    collection, images = cc_collection(n_images=3)
    caps = [im.captions.get() for im in images]
    campaign = rating_campaign(collection, {caps[0]: ["fluent", "fluent"], caps[1]: ["fluent", "not_fluent"],
                                            caps[2]: ["fluent", "difficult"]}, kind="fluency", name="fluency")
    release = make_release(collections=[collection.pk], vote_rules=[{"campaign": campaign.pk, "rule": "fluent"}])
    freeze(release)
    assert [r.caption_id for r in items(release)] == [caps[0].pk]


def test_origins_languages_and_cap_per_image():
    collection, images = cc_collection(n_images=2)
    add_caption(images[0], "a crowd caption of a premiere", origin="crowd", source="write campaign")
    add_caption(images[0], "une légende en français", language="fr")
    add_caption(images[0], CC_EXTRA[0], source="other.tsv")
    only_alt = make_release("alt", collections=[collection.pk], origins=["alt_text"], languages=["en"],
                            max_captions_per_image=2)
    freeze(only_alt)
    rows = items(only_alt)
    assert [r.text for r in rows] == [CC_PAIRS[0][0], CC_EXTRA[0], CC_PAIRS[1][0]]
    assert [e["code"] for e in only_alt.report] == []
    capped = make_release("cap", collections=[collection.pk], max_captions_per_image=1)
    freeze(capped)
    assert len([r for r in items(capped) if r.provenance["image"] == images[0].pk]) == 1
    assert sum(e["code"] == "over_cap" for e in capped.report) == 3


def test_dedup_by_sha256_and_phash():
    collection, images = cc_collection(n_images=3)
    other = type(collection).objects.create(name="mirror")
    copy = add_image(other, image_bytes(0))  # the same bytes as images[0], in another collection
    add_caption(copy, "the same picture again")
    # images[1] re-encoded as JPEG: other bytes, the same picture (near-duplicate pHash).
    with default_storage.open(images[1].file.name, "rb") as fh:
        pic = PILImage.open(fh).convert("RGB").resize((64, 48), PILImage.NEAREST)
    out = io.BytesIO()
    pic.save(out, "JPEG", quality=92)
    near = add_image(other, out.getvalue())
    add_caption(near, "the second picture, resized")
    collections = [collection.pk, other.pk]
    plain = make_release("none", collections=collections, dedup="none")
    freeze(plain)
    assert plain.counts["total"] == {"images": 5, "captions": 5}
    by_sha = make_release("sha", collections=collections)
    freeze(by_sha)
    assert by_sha.counts["total"]["images"] == 4
    assert [e["code"] for e in by_sha.report] == ["duplicate_image"] and by_sha.report[0]["image"] == copy.pk
    by_phash = make_release("phash", collections=collections, dedup="phash")
    freeze(by_phash)
    assert by_phash.counts["total"]["images"] == 3
    near_entry = next(e for e in by_phash.report if e["code"] == "near_duplicate_image")
    assert (near_entry["image"], near_entry["of"]) == (near.pk, images[1].pk)


def test_splits_are_deterministic_by_image_and_honour_the_ratios():
    collection = cc_collection(n_images=0)[0]
    imgs = [Image(collection=collection, file=f"images/x/{i}.png", sha256=f"{i:064x}", width=8, height=8,
                  format="PNG") for i in range(1000)]
    Image.objects.bulk_create(imgs)
    saved = list(Image.objects.filter(collection=collection).order_by("pk"))
    Caption.objects.bulk_create([Caption(image=im, text=f"{CC_EXTRA[k % 6]} {im.pk}", text_hash=f"{im.pk}-{k}",
                                         origin="alt_text", language="en") for im in saved for k in range(2)])
    for im in saved:
        default_storage.save(im.file.name, io.BytesIO(b"x"))
    ratios = {"train": 0.7, "val": 0.2, "test": 0.1}
    a = make_release("a", collections=[collection.pk], splits=ratios, seed=11)
    b = make_release("b", collections=[collection.pk], splits=ratios, seed=11)
    c = make_release("c", collections=[collection.pk], splits=ratios, seed=12)
    for r in (a, b, c):
        freeze(r)
    assert quotas(1000, ratios) == {"train": 700, "val": 200, "test": 100}
    assert {s: a.counts[s]["images"] for s in ("train", "val", "test")} == {"train": 700, "val": 200, "test": 100}
    assert {s: a.counts[s]["captions"] for s in ("train", "val", "test")} == {"train": 1400, "val": 400, "test": 200}

    def split_of(release):
        out = {}
        for r in items(release):
            out.setdefault(r.image_sha256, set()).add(r.split)
        return out

    sa, sb, sc = split_of(a), split_of(b), split_of(c)
    assert all(len(v) == 1 for v in sa.values())  # both captions of an image share its split
    assert sa == sb and a.content_hash == b.content_hash  # same data, same seed: same split, same hash
    assert sa != sc and a.content_hash != c.content_hash


def test_human_verified_test_split():
    collection, images = cc_collection(n_images=10)
    caps = [im.captions.get() for im in images]
    extra = {im.pk: add_caption(im, f"{CC_EXTRA[0]} number {i}") for i, im in enumerate(images)}
    # Two-thirds of the images have one caption with 2+ GOOD votes; the rest have none.
    verified = [caps[i] for i in range(10) if i % 3 != 2]
    campaign = rating_campaign(collection, {c: ["good", "good", "bad"] for c in verified})
    release = make_release(collections=[collection.pk], splits={"train": 0.6, "val": 0.1, "test": 0.3},
                           test_human_verified=True,
                           verified_by=[{"campaign": campaign.pk, "rule": "good_2plus"}])
    freeze(release)
    rows = items(release)
    test = [r for r in rows if r.split == "test"]
    assert len({r.image_sha256 for r in test}) == 3
    assert test and all(r.human_verified for r in test)
    assert {r.caption_id for r in test} <= {c.pk for c in verified}
    for r in test:  # the other caption of a test image went to train
        other = next(x for x in rows if x.caption_id == extra[r.provenance["image"]].pk)
        assert other.split == "train" and not other.human_verified
    assert "the test split holds only human-verified captions" in release.card


def test_crowd_captions_that_passed_a_rating_are_human_verified():
    collection, images = cc_collection(n_images=2)
    written = add_caption(images[0], "a man in a suit smiles at the premiere", origin="crowd", source="write")
    unrated = add_caption(images[1], "a plane lands on a runway", origin="crowd", source="write")
    rating_campaign(collection, {written: ["good", "good", "good"]})
    release = make_release(collections=[collection.pk])
    freeze(release)
    flags = {r.caption_id: r.human_verified for r in items(release)}
    assert flags[written.pk] is True and flags[unrated.pk] is False
    assert flags[images[0].captions.get(origin="alt_text").pk] is False


def test_release_unchanged_after_source_captions_are_edited_or_deleted():
    collection, images = cc_collection(n_images=3)
    release = make_release(collections=[collection.pk])
    freeze(release)
    before = [(r.text, r.provenance, r.split) for r in items(release)]
    digest = release.content_hash
    caption = images[0].captions.get()
    caption.text = "edited after the freeze"
    caption.save()
    images[1].captions.all().delete()
    images[2].delete()
    release.refresh_from_db()
    assert [(r.text, r.provenance, r.split) for r in items(release)] == before
    assert content_hash(release) == digest
    with pytest.raises(ReleaseError) as info:
        freeze(release)
    assert "frozen" in info.value.message
    release.refresh_from_db()
    assert release.status == Release.Status.FROZEN and release.content_hash == digest


def test_empty_selection_fails_with_a_clear_message():
    collection, _ = cc_collection(n_images=2)
    release = make_release(collections=[collection.pk], languages=["de"])
    with pytest.raises(ReleaseError) as info:
        freeze(release)
    assert info.value.message.startswith("The selection holds no captions")
    release.refresh_from_db()
    assert release.status == Release.Status.FAILED and release.error.startswith("The selection holds no captions")
    assert not ReleaseItem.objects.filter(release=release).exists()


def test_missing_image_skip_records_and_fail_fails():
    collection, images = cc_collection(n_images=3)
    default_storage.delete(images[1].file.name)
    pending = Image.objects.create(collection=collection, status=Image.Status.PENDING, source_url="http://x/y.jpg")
    add_caption(pending, "a picture not downloaded yet")
    skip = make_release("skip", collections=[collection.pk], missing_image="skip")
    freeze(skip)
    assert skip.counts["total"] == {"images": 2, "captions": 2}
    missing = sorted((e["image"], e["code"]) for e in skip.report)
    assert missing == [(images[1].pk, "missing_image"), (pending.pk, "missing_image")]
    assert "missing from storage" in next(e for e in skip.report if e["image"] == images[1].pk)["message"]
    fail = make_release("fail", collections=[collection.pk], missing_image="fail")
    with pytest.raises(ReleaseError) as info:
        freeze(fail)
    assert info.value.field == "missing_image" and f"#{images[1].pk}" in info.value.message
    fail.refresh_from_db()
    assert fail.status == Release.Status.FAILED and "missing" in fail.error
    assert not ReleaseItem.objects.filter(release=fail).exists()


def test_real_photos_freeze(shared_photos):
    import csv

    credits = {row["ImageID"]: row for row in csv.DictReader(open(shared_photos / "credits.csv", encoding="utf-8"))}
    collection = cc_collection(n_images=0)[0]
    for n, path in enumerate(sorted(shared_photos.glob("*.jpg"))[:5]):
        row = credits[path.stem]
        image = add_image(collection, path.read_bytes(), license=row["License"], credit=row["Author"],
                          external_id=path.stem)
        add_caption(image, row["Title"] or CC_EXTRA[n])
    release = make_release(collections=[collection.pk])
    freeze(release)
    assert release.counts["total"]["images"] == 5
    assert all(r.image_format == "JPEG" and r.width > 0 for r in items(release))
    for author in {credits[p.stem]["Author"] for p in sorted(shared_photos.glob("*.jpg"))[:5]}:
        assert f"- {md(author)} (1)" in release.card
