"""An export copies an image file without hashing it again only when the file is provably the one
that last hashed right: its stat token (size, modification and change times, inode) equals the one
recorded by the import that wrote it or by the export that last hashed it. Any change through the
file system is caught and fails the export; "re-export and verify" hashes every image regardless,
so the one thing the token cannot see (bytes that change under an unchanged stat) still shows there."""
from __future__ import annotations

import io
import os
import zipfile

import pytest
from django.core.files.storage import default_storage

from curation.ingest import file_stat
from curation.models import Image, ImportJob
from releases import ReleaseError, services
from releases.formats import images as image_shards
from releases.formats import write
from releases.verify import run_verify

from .helpers import run_import
from .release_helpers import image_bytes
from .test_release_services import export_now

pytestmark = pytest.mark.django_db


@pytest.fixture
def hashed(monkeypatch):
    """How many image files the export hashed (each one a HashingReader)."""
    count = [0]
    real = image_shards.HashingReader

    class Counting(real):
        def __init__(self, fh):
            count[0] += 1
            super().__init__(fh)

    monkeypatch.setattr(image_shards, "HashingReader", Counting)
    return count


def images_of(release):
    return list(Image.objects.filter(pk__in=release.items.values("image_id")).order_by("pk"))


def test_the_first_export_hashes_and_records_then_the_next_trusts(release, tmp_path, hashed):
    photos = images_of(release)
    assert all(p.file_stat == "" for p in photos)  # made without an import: nothing known yet
    first = write("jsonl", release, tmp_path / "a", {})
    assert hashed[0] == len(photos)
    for p in images_of(release):
        assert p.file_stat == file_stat.of_stored(p.file.name)
    second = write("jsonl", release, tmp_path / "b", {})
    assert hashed[0] == len(photos)  # nothing hashed again
    assert [(f["name"], f["sha256"]) for f in first] == [(f["name"], f["sha256"]) for f in second]
    write("jsonl", release, tmp_path / "c", {"verify_images": "always"})
    assert hashed[0] == 2 * len(photos)


@pytest.mark.parametrize("change", ["rewrite", "same_size_and_mtime", "replace_file"])
def test_a_file_changed_after_its_token_was_recorded_is_hashed_and_fails(release, tmp_path, change):
    write("jsonl", release, tmp_path / "a", {})  # tokens recorded
    victim = images_of(release)[3]
    path = default_storage.path(victim.file.name)
    before = os.stat(path)
    data = bytearray(open(path, "rb").read())
    if change == "rewrite":
        open(path, "wb").write(image_bytes(4242))
    elif change == "same_size_and_mtime":  # one byte flipped in place, size and mtime put back
        data[len(data) // 2] ^= 0xFF
        with open(path, "r+b") as fh:
            fh.write(bytes(data))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(path).st_size == before.st_size and os.stat(path).st_mtime_ns == before.st_mtime_ns
    else:  # a restore from backup: a new inode with the same bytes but one
        data[10] ^= 0x01
        os.remove(path)
        open(path, "wb").write(bytes(data))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ReleaseError) as info:
        write("jsonl", release, tmp_path / "b", {})
    assert info.value.field == "images" and victim.file.name in info.value.message
    assert list((tmp_path / "b").iterdir()) == []


def test_an_import_records_the_token_of_the_file_it_writes(db, tmp_path):
    from curation.models import Collection

    collection = Collection.objects.create(name="Harbour")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(3):
            zf.writestr(f"harbour-{i}.jpg", image_bytes(700 + i, fmt="JPEG"))
    upload = tmp_path / "harbour.zip"
    upload.write_bytes(archive.getvalue())
    job = run_import(collection, ImportJob.Kind.IMAGES, upload)
    assert job.status == ImportJob.Status.DONE
    stored = list(Image.objects.filter(collection=collection))
    assert len(stored) == 3
    assert all(i.file_stat and i.file_stat == file_stat.of_stored(i.file.name) for i in stored)


def test_verify_hashes_every_image_even_where_the_token_matches(release):
    """Bytes that change under an unchanged stat (bit rot) pass the export's quick check: the
    re-export and verify action hashes everything and names the image."""
    export = export_now(release, "jsonl", {})
    victim = images_of(release)[2]
    path = default_storage.path(victim.file.name)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 3] ^= 0xFF
    open(path, "wb").write(bytes(data))
    Image.objects.filter(pk=victim.pk).update(file_stat=file_stat.of_stored(victim.file.name))  # the rot unseen
    services.export_verify(export, enqueue=False)
    v = run_verify(export.pk).verification
    assert v["ok"] is False and v["status"] == "failed"
    assert victim.file.name in v["error"] and "no longer matches" in v["error"]
