"""Exports with their images. Every format read back by its own reader (json for COCO, Karpathy and
JSONL, csv, pyarrow for Parquet, webdataset for WebDataset) after its images shards are extracted
next to the annotation files: every image path an annotation gives opens with PIL and hashes to the
release's sha256, and nothing in ``images/`` is unreferenced. Without images, the manifest names the
storage and the paths are its file names. Images are streamed in blocks; shards split by size; a
missing image is skipped with a count or fails with the list; a file whose bytes changed fails; an
interrupted export leaves nothing visible."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from PIL import Image as PILImage

from releases import ReleaseError
from releases.formats import write
from releases.formats.images import BLOCK
from releases.freeze import freeze
from releases.models import ReleaseItem

from .release_helpers import add_caption, add_image, image_bytes, make_release

pytestmark = pytest.mark.django_db

ANNOTATED = ("coco", "karpathy", "jsonl", "csv", "parquet")
def items(release):
    return list(ReleaseItem.objects.filter(release=release).order_by("position"))


def extract(files: list[dict], folder: Path) -> list[str]:
    """Extract every images shard into ``folder`` (as a user would); returns the member names."""
    members = []
    for entry in files:
        path = folder / entry["name"]
        if "-images-" not in entry["name"]:
            continue
        if path.suffix == ".tar":
            with tarfile.open(path) as tar:
                members += tar.getnames()
                tar.extractall(folder, filter="data")
        else:
            with zipfile.ZipFile(path) as archive:
                members += archive.namelist()
                archive.extractall(folder)
    return members


def image_paths(fmt: str, folder: Path, release) -> list[tuple[str, str]]:
    """(image path, sha256) of every caption row, read with the format's own reader."""
    prefix = f"release-{release.pk}"
    if fmt == "coco":
        rows = []
        for split in ("train", "val", "test"):
            path = folder / f"{prefix}-captions_{split}.json"
            if path.exists():
                data = json.loads(path.read_text(encoding="utf-8"))
                images = {img["id"]: img for img in data["images"]}
                rows += [(images[a["image_id"]]["file_name"], images[a["image_id"]]["sha256"])
                         for a in data["annotations"]]
        return rows
    if fmt == "karpathy":
        data = json.loads((folder / f"{prefix}-dataset_coco.json").read_text(encoding="utf-8"))
        shas = {i.provenance["image"]: i.image_sha256 for i in items(release)}
        return [(f"{img['filepath']}/{img['filename']}", shas[img["cocoid"]]) for img in data["images"]
                for _ in img["sentences"]]
    if fmt == "jsonl":
        lines = (folder / f"{prefix}.jsonl").read_text(encoding="utf-8").splitlines()
        return [(r["file"], r["image_sha256"]) for r in map(json.loads, lines)]
    if fmt == "csv":
        with open(folder / f"{prefix}.csv", encoding="utf-8", newline="") as fh:
            return [(r["file"], r["image_sha256"]) for r in csv.DictReader(fh)]
    import pyarrow.parquet as pq

    table = pq.read_table(folder / f"{prefix}.parquet")
    return list(zip(table.column("file").to_pylist(), table.column("image_sha256").to_pylist()))


def manifest(folder: Path, release) -> dict:
    return json.loads((folder / f"release-{release.pk}-export.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("archive", ["tar", "zip"])
@pytest.mark.parametrize("fmt", ANNOTATED)
def test_every_format_with_images_opens_each_image_from_the_path_its_annotations_give(release, tmp_path, fmt,
                                                                                      archive):
    files = write(fmt, release, tmp_path, {"image_archive": archive})
    shards = [f["name"] for f in files if "-images-" in f["name"]]
    assert shards == [f"release-{release.pk}-images-000000.{archive}"]
    members = extract(files, tmp_path)
    rows = image_paths(fmt, tmp_path, release)
    assert len(rows) == release.items_total
    for path, sha in rows:
        assert not path.startswith("/") and ".." not in path and path.startswith("images/")
        data = (tmp_path / path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha
        with PILImage.open(tmp_path / path) as img:
            img.verify()
    # Each distinct image once, nothing unreferenced.
    assert sorted(members) == sorted({path for path, _ in rows})
    assert len(members) == len({i.image_sha256 for i in items(release)})
    info = manifest(tmp_path, release)
    assert info["images"]["included"] is True and info["images"]["shards"] == shards
    assert info["images"]["images"] == len(members) and info["options"]["image_archive"] == archive
    listed = {f["name"]: f["sha256"] for f in info["files"]}
    assert listed == {f["name"]: f["sha256"] for f in files if not f["name"].endswith("-export.json")}


def test_webdataset_samples_carry_their_images_and_name_them(release, tmp_path):
    import webdataset as wds

    files = write("webdataset", release, tmp_path, {"samples_per_shard": 2})
    shards = [str(tmp_path / f["name"]) for f in files if f["name"].endswith(".tar")]
    samples = list(wds.WebDataset(shards, shardshuffle=False))
    assert sum(len(json.loads(s["json"])["captions"]) for s in samples) == release.items_total
    for sample in samples:
        meta = json.loads(sample["json"])
        key, ext = meta["file"].split(".")
        assert key == sample["__key__"] and ext in ("png", "jpg")
        assert hashlib.sha256(sample[ext]).hexdigest() == meta["image_sha256"]
        with PILImage.open(io.BytesIO(sample[ext])) as img:
            assert (img.width, img.height) == (meta["width"], meta["height"])
    assert manifest(tmp_path, release)["images"]["included"] is True


@pytest.mark.parametrize("fmt", (*ANNOTATED, "webdataset"))
def test_without_images_the_manifest_names_the_storage_and_paths_are_storage_names(release, tmp_path, fmt):
    opened = []
    files = write(fmt, release, tmp_path, {"images": "none"}, storage_open=lambda name: opened.append(name))
    assert opened == []  # no image file is read
    assert not any("-images-" in f["name"] for f in files)
    info = manifest(tmp_path, release)
    assert info["images"]["included"] is False
    assert info["images"]["storage"]["backend"] == "django.core.files.storage.filesystem.FileSystemStorage"
    assert info["images"]["storage"]["location"] == str(settings.MEDIA_ROOT)
    assert "storage-relative" in info["images"]["paths"]
    if fmt == "webdataset":
        import webdataset as wds

        samples = list(wds.WebDataset([str(tmp_path / f["name"]) for f in files if f["name"].endswith(".tar")],
                                       shardshuffle=False))
        rows = [(json.loads(s["json"])["file"], json.loads(s["json"])["image_sha256"]) for s in samples]
        assert samples and not any(ext in s for s in samples for ext in ("png", "jpg"))  # json only
    else:
        rows = image_paths(fmt, tmp_path, release)
    for path, sha in rows:
        with default_storage.open(path, "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == sha


def test_large_releases_get_several_shards_and_images_are_streamed_in_blocks(release, tmp_path):
    big = add_image(release.items.first().image.collection, image_bytes(7, size=(900, 700)), external_id="big")
    assert big.file_size > BLOCK  # a noise PNG over 1 MiB
    add_caption(big, "a wide panorama of terraced vineyards above a river")
    again = make_release("stock-v2", **{k: v for k, v in release.config.items()
                                        if k in ("collections", "splits", "seed")})
    freeze(again)
    reads = []

    class Recording:
        def __init__(self, name):
            self.fh = default_storage.open(name, "rb")
            self.size = self.fh.size

        def read(self, n=-1):
            reads.append(n)
            return self.fh.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    files = write("jsonl", again, tmp_path, {"shard_size": 4000}, storage_open=Recording)
    shards = [f for f in files if "-images-" in f["name"]]
    assert len(shards) > 2
    assert reads and all(0 < n <= BLOCK for n in reads)  # never read(-1): no file whole in memory
    for entry in shards:  # the hash computed while writing is the file's
        assert hashlib.sha256((tmp_path / entry["name"]).read_bytes()).hexdigest() == entry["sha256"]
    extract(files, tmp_path)
    for path, sha in image_paths("jsonl", tmp_path, again):
        assert hashlib.sha256((tmp_path / path).read_bytes()).hexdigest() == sha
    # WebDataset samples stream their image the same way.
    reads.clear()
    files = write("webdataset", again, tmp_path / "wds", {"samples_per_shard": 3}, storage_open=Recording)
    assert reads and all(0 < n <= BLOCK for n in reads) and len(files) > 3
    for entry in files:
        assert hashlib.sha256((tmp_path / "wds" / entry["name"]).read_bytes()).hexdigest() == entry["sha256"]


def test_a_missing_image_is_skipped_with_a_count(release, tmp_path):
    victims = {i.image_sha256: i.image_file for i in items(release)[:3]}
    for name in victims.values():
        default_storage.delete(name)
    left_out = sum(1 for i in items(release) if i.image_sha256 in victims)
    report = []
    files = write("csv", release, tmp_path, {"missing_images": "skip", "report": report})
    extract(files, tmp_path)
    rows = image_paths("csv", tmp_path, release)
    assert len(rows) == release.items_total - left_out
    assert not {sha for _, sha in rows} & set(victims)
    summary = next(e for e in report if e["code"] == "missing_images")
    assert (summary["images"], summary["captions"]) == (len(victims), left_out)
    assert sorted(e["file"] for e in report if e["code"] == "missing_image") == sorted(victims.values())
    info = manifest(tmp_path, release)
    assert info["missing_images"] == {"policy": "skip", "images": len(victims), "captions_left_out": left_out}


@pytest.mark.parametrize("fmt", ["coco", "webdataset"])
def test_missing_images_fail_with_the_whole_list_and_nothing_is_left_behind(release, tmp_path, fmt):
    victims = sorted({i.image_file for i in items(release)[:4]})
    for name in victims:
        default_storage.delete(name)
    with pytest.raises(ReleaseError) as info:
        write(fmt, release, tmp_path / "out", {"missing_images": "fail"})
    assert info.value.field == "missing_images"
    assert f"{len(victims)} image files are missing" in info.value.message
    assert all(name in info.value.message for name in victims)
    assert list((tmp_path / "out").iterdir()) == []


def test_an_image_whose_bytes_changed_fails_the_export(release, tmp_path):
    victim = items(release)[0]
    default_storage.delete(victim.image_file)
    default_storage.save(victim.image_file, io.BytesIO(image_bytes(999)))
    with pytest.raises(ReleaseError) as info:
        write("jsonl", release, tmp_path / "out", {})
    assert info.value.field == "images" and victim.image_file in info.value.message
    assert list((tmp_path / "out").iterdir()) == []


def test_a_changed_image_in_the_middle_of_the_shards_fails_the_export_by_name(release, tmp_path):
    """Shards already closed before the changed image are taken back with the rest."""
    ordered = sorted(items(release), key=lambda i: i.image_sha256)
    victim = ordered[len(ordered) // 2]  # images are written by sha256: one in the middle
    default_storage.delete(victim.image_file)
    default_storage.save(victim.image_file, io.BytesIO(image_bytes(998)))
    with pytest.raises(ReleaseError) as info:
        write("jsonl", release, tmp_path / "out", {"shard_size": 1})
    assert info.value.field == "images" and victim.image_file in info.value.message
    assert f"#{victim.image_id}" in info.value.message
    assert list((tmp_path / "out").iterdir()) == []


class WorkerKilled(BaseException):
    """What a killed worker looks like to the writer: not an Exception, nothing catches it."""


@pytest.mark.parametrize("fmt", ["parquet", "webdataset"])
def test_an_interrupted_export_leaves_no_file_visible(release, tmp_path, fmt):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the curator's own file stays")
    opened = []

    def dying_open(name):
        opened.append(name)
        if len(opened) == 4:
            raise WorkerKilled()
        return default_storage.open(name, "rb")

    with pytest.raises(WorkerKilled):
        write(fmt, release, out, {"samples_per_shard": 1, "shard_size": 1024}, storage_open=dying_open)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]  # no shard, no staging folder
    files = write(fmt, release, out, {"samples_per_shard": 1, "shard_size": 1024})
    assert sorted(p.name for p in out.iterdir()) == sorted([f["name"] for f in files] + ["notes.txt"])


def test_zip_and_tar_shards_are_byte_identical_on_a_second_write(release, tmp_path):
    for archive in ("tar", "zip"):
        first = write("coco", release, tmp_path / archive / "a", {"image_archive": archive, "shard_size": 3000})
        second = write("coco", release, tmp_path / archive / "b", {"image_archive": archive, "shard_size": 3000})
        assert first == second and len([f for f in first if "-images-" in f["name"]]) > 1
        for entry in first:
            assert (tmp_path / archive / "a" / entry["name"]).read_bytes() == \
                (tmp_path / archive / "b" / entry["name"]).read_bytes()



def test_tar_shards_keep_no_member_list_and_write_the_same_bytes_as_tarfile(tmp_path):
    """A shard of many images holds no TarInfo per member (tarfile keeps one per member until it closes: a
    kilobyte each, gigabytes for a release of millions of images), and its bytes are tarfile's own."""
    import io
    import tarfile

    from releases.formats.images import add_member

    def member(i):
        info = tarfile.TarInfo(f"images/{i % 256:02x}/{i:064x}.jpg")
        data = bytes([i % 251]) * (300 + i % 700)
        info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o444, "captionlab", "captionlab"
        return info, data

    plain, lean = io.BytesIO(), io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(3000):
            info, data = member(i)
            tar.addfile(info, io.BytesIO(data))
        assert len(tar.members) == 3000  # what the standard writer holds until the shard closes
    with tarfile.open(fileobj=lean, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(3000):
            info, data = member(i)
            add_member(tar, info, io.BytesIO(data))
            assert not tar.members
    assert lean.getvalue() == plain.getvalue()
    with tarfile.open(fileobj=io.BytesIO(lean.getvalue())) as back:
        assert len(back.getmembers()) == 3000 and back.extractfile(back.getmembers()[7]).read() == member(7)[1]
