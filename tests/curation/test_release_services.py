"""Release services, tasks and publishing: create/validate, freeze through the task (empty selection,
missing image files), exports reused and published whole (never a ``.partial`` left, never half a
file), byte-identical re-exports after the source captions change, and the ``release`` command."""
import hashlib
import io
import json
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from PIL import Image as PILImage
from PIL import ImageDraw

from annotation.models import Aggregate, Campaign, Task, Vote, Worker
from curation.models import Caption, Collection, Image
from releases import ReleaseError, publish, services
from releases.models import Release, ReleaseExport, ReleaseItem

FORMATS = ("coco", "karpathy", "jsonl", "csv", "parquet", "webdataset")


# --- Test data: a collection with real image files, and a quality campaign with votes -----------------


def picture(i: int) -> bytes:
    img = PILImage.new("RGB", (96 + 8 * i, 64), (30 + 20 * i % 200, 90, 200 - 15 * i % 180))
    ImageDraw.Draw(img).ellipse((10, 10, 40 + 3 * i, 50), fill=(240, 200 - 9 * i % 150, 60))
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def make_collection(name="Release photos", n_images=10, captions_per_image=2, texts=None) -> Collection:
    """Images with real JPEG files in storage and ``captions_per_image`` captions each."""
    collection = Collection.objects.create(name=name)
    for i in range(n_images):
        data = picture(i + 37 * len(name))
        sha = hashlib.sha256(data).hexdigest()
        image = Image(collection=collection, external_id=f"{name[:3]}-{i}", sha256=sha, format="JPEG",
                      width=96 + 8 * i, height=64, file_size=len(data), status="ready",
                      license="CC BY 2.0", credit=f"photographer {i}")
        image.file.save(f"{sha}.jpg", ContentFile(data), save=False)
        image.save()
        for j in range(captions_per_image):
            text = texts[(i * captions_per_image + j) % len(texts)] if texts else \
                f"a {['red', 'green', 'blue', 'white'][j % 4]} bird number {i} sits on branch {j}"
            Caption.objects.create(image=image, text=text, origin="alt_text", language="en", source="test")
    return collection


def make_quality_campaign(collection: Collection, name="Quality check") -> Campaign:
    """A GOOD/BAD campaign over every caption: the first caption of each image gets 3 GOOD votes,
    the others 1 GOOD and 2 BAD; majority aggregates say so."""
    campaign = Campaign.objects.create(name=name, kind="quality", collection=collection, status="running")
    workers = [Worker.objects.create(provider=Worker.Provider.LINKOUT, external_id=f"w{k}") for k in range(3)]
    for position, caption in enumerate(Caption.objects.filter(image__collection=collection).order_by("image_id", "pk")):
        first = not Caption.objects.filter(image=caption.image, pk__lt=caption.pk).exists()
        task = Task.objects.create(campaign=campaign, image=caption.image, caption=caption, status="done",
                                   votes_required=3, votes_count=3, position=position)
        labels = ["good", "good", "good"] if first else ["good", "bad", "bad"]
        for worker, label in zip(workers, labels):
            Vote.objects.create(task=task, worker=worker, campaign=campaign, value={"label": label})
        Aggregate.objects.create(task=task, method="majority", label="good" if first else "bad",
                                 confidence=1.0 if first else 0.67, n_votes=3)
    return campaign


def config_for(collection, **extra) -> dict:
    config = {"collections": [collection.pk], "splits": {"train": 0.6, "val": 0.2, "test": 0.2}, "seed": 3,
              "dedup": "sha256", "missing_image": "skip"}
    config.update(extra)
    return config


def frozen_release(collection, name="rel", **extra) -> Release:
    release = services.release_create(name, config_for(collection, **extra), None)
    release = services.run_freeze(release.pk)
    assert release.status == Release.Status.FROZEN, release.error
    return release


def export_now(release, fmt, options=None) -> ReleaseExport:
    export = services.export_create(release, fmt, options or {}, None, enqueue=False)
    return publish.run_export(export.pk)


def stored(export) -> dict[str, bytes]:
    return {name[len(publish.export_prefix(export)):]: default_storage.open(name).read()
            for name in publish.stored_files(export)}


# --- Creating and freezing -------------------------------------------------------------------------------


def test_release_create_checks_the_name_and_the_config(db):
    collection = make_collection(n_images=2)
    with pytest.raises(ReleaseError) as err:
        services.release_create("  ", config_for(collection), None)
    assert err.value.field == "name"
    with pytest.raises(ReleaseError) as err:
        services.release_create("r", {**config_for(collection), "collections": []}, None)
    assert err.value.field == "collections"
    with pytest.raises(ReleaseError) as err:
        services.release_create("r", config_for(collection, dedup="md5"), None)
    assert err.value.field == "dedup"
    release = services.release_create("r", config_for(collection), None)
    assert release.status == Release.Status.QUEUED and release.config["collections"] == [collection.pk]
    with pytest.raises(ReleaseError) as err:
        services.release_create("r", config_for(collection), None)
    assert err.value.field == "name" and "exists" in err.value.message
    assert Release.objects.count() == 1


def test_freezing_through_the_task_with_a_human_verified_test_split(db, eager_celery, django_capture_on_commit_callbacks):
    collection = make_collection(n_images=10)
    campaign = make_quality_campaign(collection)
    with django_capture_on_commit_callbacks(execute=True):
        release = services.release_create("verified", config_for(
            collection, test_human_verified=True, verified_by=[{"campaign": campaign.pk, "rule": "good_2plus"}]),
            None, freeze=True)
    release.refresh_from_db()
    assert release.status == Release.Status.FROZEN, release.error
    items = ReleaseItem.objects.filter(release=release)
    assert items.count() == 20 and release.items_total == 20
    assert items.filter(human_verified=True).count() == 10  # the first caption of each image: 3 GOOD
    test_items = items.filter(split="test")
    assert test_items.exists() and not test_items.filter(human_verified=False).exists()
    assert len(release.content_hash) == 64 and "# " in release.card
    # Freezing again is refused: a frozen release never changes.
    with pytest.raises(ReleaseError):
        services.release_freeze(release)


def test_a_vote_rule_keeps_only_captions_with_enough_good_votes(db):
    collection = make_collection(n_images=5)
    campaign = make_quality_campaign(collection)
    release = frozen_release(collection, vote_rules=[{"campaign": campaign.pk, "rule": "good_2plus"}])
    texts = list(ReleaseItem.objects.filter(release=release).values_list("text", flat=True))
    assert len(texts) == 5 and all(t.endswith("branch 0") for t in texts)


def test_an_empty_selection_fails_the_release_with_a_clear_message_and_loses_nothing(db, eager_celery,
                                                                                  django_capture_on_commit_callbacks):
    full = make_collection("Full", n_images=3)
    good = frozen_release(full, name="good one")
    empty = Collection.objects.create(name="Empty")
    with django_capture_on_commit_callbacks(execute=True):
        release = services.release_create("nothing", config_for(empty), None, freeze=True)
    release.refresh_from_db()
    assert release.status == Release.Status.FAILED
    assert release.error and "caption" in release.error.lower()
    assert not ReleaseItem.objects.filter(release=release).exists()
    good.refresh_from_db()
    assert good.status == Release.Status.FROZEN and good.items.count() == 6
    # The failed release may be frozen again once there is something to select.
    Caption.objects.create(image=Image.objects.create(collection=empty, external_id="late", status="missing"),
                           text="a late caption", origin="alt_text")
    services.release_freeze(release, enqueue=False)
    assert Release.objects.get(pk=release.pk).status == Release.Status.QUEUED


def test_a_missing_image_file_is_skipped_with_a_record_or_fails_the_release(db):
    collection = make_collection(n_images=4)
    gone = collection.images.order_by("pk").first()
    default_storage.delete(gone.file.name)
    release = frozen_release(collection, name="skip")
    assert release.items.count() == 6
    assert not release.items.filter(image_id=gone.pk).exists()
    assert any(gone.file.name in json.dumps(entry) or str(gone.pk) in json.dumps(entry) for entry in release.report)
    failing = services.release_create("fail", config_for(collection, missing_image="fail"), None)
    failing = services.run_freeze(failing.pk)
    assert failing.status == Release.Status.FAILED and failing.error
    assert not failing.items.exists()


def test_an_interrupted_freeze_starts_over_from_no_items(db):
    collection = make_collection(n_images=3)
    release = services.release_create("again", config_for(collection), None)
    # What a worker killed mid-freeze leaves: some rows and the freezing status.
    ReleaseItem.objects.create(release=release, position=0, split="train", image_sha256="x" * 64, image_file="x",
                               text="stale row of a dead attempt")
    Release.objects.filter(pk=release.pk).update(status=Release.Status.FREEZING)
    release = services.run_freeze(release.pk)
    assert release.status == Release.Status.FROZEN
    assert release.items.count() == 6 and not release.items.filter(text__startswith="stale").exists()
    hash_before = release.content_hash
    assert services.run_freeze(release.pk).content_hash == hash_before  # redelivered: left alone


# --- Exports -----------------------------------------------------------------------------------------------


def test_export_create_refuses_a_release_that_is_not_frozen_and_checks_options(db):
    release = Release.objects.create(name="queued", config={})
    with pytest.raises(ReleaseError) as err:
        services.export_create(release, "jsonl", {}, None)
    assert err.value.field == "release"
    Release.objects.filter(pk=release.pk).update(status=Release.Status.FROZEN)
    release.refresh_from_db()
    for fmt, options, field in (("tar", {}, "format"), ("webdataset", {"shard_size": "ten"}, "shard_size"),
                                ("webdataset", {"shard_size": 10}, "shard_size"),
                                ("webdataset", {"samples_per_shard": 0}, "samples_per_shard"),
                                ("webdataset", {"samples_per_shard": 2.5}, "samples_per_shard"),
                                ("jsonl", {"images": "none", "shard_size": 5000}, "options"),
                                ("csv", {"delimiter": ";"}, "options"), ("coco", {"images": "all"}, "images"),
                                ("coco", {"image_archive": "rar"}, "image_archive"),
                                ("jsonl", {"images": "none", "image_archive": "zip"}, "options"),
                                ("webdataset", {"image_archive": "zip"}, "options"),
                                ("parquet", {"missing_images": "ignore"}, "missing_images"),
                                ("csv", {"images": "none", "missing_images": "fail"}, "missing_images")):
        with pytest.raises(ReleaseError) as err:
            services.export_create(release, fmt, options, None)
        assert err.value.field == field, (fmt, options)
    assert not ReleaseExport.objects.exists()


def test_every_format_is_published_whole_and_a_done_export_is_reused(db):
    release = frozen_release(make_collection(n_images=6))
    for fmt in FORMATS:
        options = {"samples_per_shard": 4} if fmt == "webdataset" else {}
        export = export_now(release, fmt, options)
        assert export.status == ReleaseExport.Status.DONE, (fmt, export.error)
        assert export.attempts == 1 and export.rows_done == export.rows_total == 12
        files = stored(export)
        assert sorted(files) == sorted(f["name"] for f in export.files)
        assert not any(name.endswith(publish.PARTIAL) for name in files)
        for entry in export.files:
            assert hashlib.sha256(files[entry["name"]]).hexdigest() == entry["sha256"]
            assert len(files[entry["name"]]) == entry["size"]
        assert export.size == sum(f["size"] for f in export.files)
        assert export.sha256 == publish.combined_sha256(export.files)
        # Asking again gives the same export; running the task again changes nothing.
        assert services.export_create(release, fmt, options, None, enqueue=False).pk == export.pk
        assert publish.run_export(export.pk).attempts == 1
    shards = ReleaseExport.objects.get(release=release, format="webdataset")
    assert len(shards.files) == 3  # 6 samples (one per image), 4 per shard, and the export manifest
    other = services.export_create(release, "webdataset", {"samples_per_shard": 6}, None, enqueue=False)
    assert other.pk != shards.pk


def test_a_failing_publication_leaves_no_file_at_all(db, monkeypatch):
    release = frozen_release(make_collection(n_images=4))
    calls = []

    def broken_rename(storage, src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("disk went away")
        return original(storage, src, dst)

    original = publish.rename_stored
    monkeypatch.setattr(publish, "rename_stored", broken_rename)
    export = export_now(release, "webdataset", {"samples_per_shard": 3})
    assert export.status == ReleaseExport.Status.FAILED and "disk went away" in export.error
    assert publish.stored_files(export) == [] and export.files == []
    monkeypatch.setattr(publish, "rename_stored", original)
    services.export_retry(export)
    export = publish.run_export(export.pk)
    assert export.status == ReleaseExport.Status.DONE and export.attempts == 2


def test_a_rerun_after_a_crash_deletes_leftovers_and_gives_the_same_bytes(db):
    release = frozen_release(make_collection(n_images=5))
    first = export_now(release, "jsonl")
    reference = stored(first)
    second = ReleaseExport.objects.create(release=release, format="jsonl", options={}, rows_total=10)
    # A dead attempt left a partial file and a stray final name behind, and the export "running".
    prefix = publish.export_prefix(second)
    default_storage.save(prefix + "release.jsonl.partial", ContentFile(b"{\"half\": "))
    default_storage.save(prefix + "stray.bin", ContentFile(b"junk"))
    ReleaseExport.objects.filter(pk=second.pk).update(status="running", attempts=1)
    second = publish.run_export(second.pk)
    assert second.status == ReleaseExport.Status.DONE and second.attempts == 2
    assert stored(second) == reference


def test_a_release_is_unchanged_after_its_captions_are_edited(db):
    collection = make_collection(n_images=4)
    release = frozen_release(collection)
    before = export_now(release, "csv")
    original = stored(before)
    caption = Caption.objects.filter(image__collection=collection).first()
    old_text = caption.text
    Caption.objects.filter(pk=caption.pk).update(text="=HYPERLINK(\"http://evil\") edited afterwards")
    Image.objects.filter(collection=collection).update(license="All rights reserved")
    assert ReleaseItem.objects.filter(release=release, caption=caption).get().text == old_text
    again = ReleaseExport.objects.create(release=release, format="csv", options={}, rows_total=8)
    assert stored(publish.run_export(again.pk)) == original


# --- The command ------------------------------------------------------------------------------------------


def test_the_release_command_creates_freezes_exports_lists_and_shows(db, tmp_path):
    collection = make_collection("Cmd photos", n_images=5)
    campaign = make_quality_campaign(collection, name="cmd quality")
    out = io.StringIO()
    call_command("release", "create", "--name", "cmd-v1", "--collections", "Cmd photos",
                 "--vote-rule", f"{campaign.name}:good_1plus", "--splits", "0.6,0.2,0.2", "--seed", "4",
                 "--test-human-verified", "--dedup", "sha256", "--max-per-image", "1", "--missing", "skip",
                 "--freeze", stdout=out)
    release = Release.objects.get(name="cmd-v1")
    assert release.status == Release.Status.FROZEN and release.items_total == 5
    assert release.config["max_captions_per_image"] == 1 and release.config["seed"] == 4
    text = out.getvalue()
    assert "frozen" in text and "100%" in text and release.content_hash in text
    out = io.StringIO()
    call_command("release", "export", str(release.pk), "--format", "webdataset", "--samples-per-shard", "2",
                 "--shard-size", "1MB",
                 "--out", str(tmp_path / "out"), stdout=out)
    export = ReleaseExport.objects.get(release=release, format="webdataset")
    local = sorted(p.name for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert local == sorted(Path(f["name"]).name for f in export.files) and len(local) == 4  # 3 shards, manifest
    for f in export.files:
        assert hashlib.sha256((tmp_path / "out" / f["name"]).read_bytes()).hexdigest() == f["sha256"]
    assert export.sha256 in out.getvalue()
    out = io.StringIO()
    call_command("release", "list", stdout=out)
    assert "cmd-v1" in out.getvalue()
    out = io.StringIO()
    call_command("release", "show", str(release.pk), stdout=out)
    assert "webdataset" in out.getvalue() and release.card.splitlines()[0] in out.getvalue()


def test_the_release_command_reports_bad_input(db):
    Collection.objects.create(name="Hollow")
    with pytest.raises(CommandError, match="no collection"):
        call_command("release", "create", "--name", "x", "--collections", "Nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--splits"):
        call_command("release", "create", "--name", "x", "--collections", "Hollow", "--splits", "0.8,0.2",
                     stdout=io.StringIO())
    with pytest.raises(CommandError, match="failed"):
        call_command("release", "create", "--name", "hollow", "--collections", "Hollow", "--freeze",
                     stdout=io.StringIO())
    release = Release.objects.get(name="hollow")
    assert release.status == Release.Status.FAILED and release.error
    with pytest.raises(CommandError, match="frozen"):
        call_command("release", "export", str(release.pk), "--format", "jsonl", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no release"):
        call_command("release", "show", "999999", stdout=io.StringIO())
