"""Export formats without images (``images: none``: image paths are storage names) read back with
their own readers (pycocotools, json, csv, pyarrow, Hugging Face datasets, webdataset) give exactly
the release's rows; every format is byte-identical on a second
write; formula-like CSV cells are neutralised; control characters are stripped and recorded;
missing image files follow the release's setting."""
from __future__ import annotations

import csv
import hashlib
import json
import string

import pytest
from django.core.files.storage import default_storage

from releases import ReleaseError
from releases.formats import BAD_CHARS, FORMATS, write
from releases.freeze import freeze
from releases.models import ReleaseItem

from .release_helpers import CC_EXTRA, CC_PAIRS, add_caption, add_image, cc_collection, make_release

pytestmark = pytest.mark.django_db

FORMULAS = ['=HYPERLINK("http://example.com/x","click")', "+1 for the premiere", "-2 degrees at the festival",
            "@SUM(A1:A9)", "\tindented alt-text"]
MULTILINE = "actors attend the premiere\nat festival\r\nin the evening"
CONTROL = "a bell\x07 and an escape\x1b[31m in an alt-text\x0b"


@pytest.fixture
def release(db):
    collection, images = cc_collection(n_images=8)
    for i, text in enumerate(FORMULAS):
        add_caption(images[i], text, source="formulas.tsv")
    add_caption(images[5], MULTILINE, source="multi.tsv")
    add_caption(images[6], CONTROL, source="control.tsv")
    jpeg = add_image(collection, seed=99, fmt="JPEG", credit="Chris_Parfitt", external_id="jpeg-1")
    add_caption(jpeg, CC_PAIRS[0][1])
    add_caption(jpeg, CC_EXTRA[0])
    rel = make_release("cc-demo", collections=[collection.pk], splits={"train": 0.6, "val": 0.2, "test": 0.2}, seed=5)
    freeze(rel)
    assert {s for s in ("train", "val", "test") if rel.counts[s]["captions"]} == {"train", "val", "test"}
    return rel


def rows(release, split=None):
    qs = ReleaseItem.objects.filter(release=release).order_by("position")
    return list(qs.filter(split=split) if split else qs)


def clean(text):
    return BAD_CHARS.sub("", text)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


NONE = {"images": "none"}


def annotations(files, release):
    """The format's own files: every file but the export manifest."""
    return [f for f in files if f["name"] != f"release-{release.pk}-export.json"]


def test_coco_json_loads_with_pycocotools(release, tmp_path):
    from pycocotools.coco import COCO

    files = annotations(write("coco", release, tmp_path, NONE), release)
    assert [f["name"] for f in files] == [f"release-{release.pk}-captions_{s}.json" for s in ("test", "train", "val")]
    for split in ("train", "val", "test"):
        coco = COCO(str(tmp_path / f"release-{release.pk}-captions_{split}.json"))
        items = rows(release, split)
        assert sorted(coco.anns) == sorted(i.provenance["caption"] for i in items)
        for item in items:
            ann = coco.anns[item.provenance["caption"]]
            assert ann["caption"] == clean(item.text) and ann["image_id"] == item.provenance["image"]
            image = coco.imgs[item.provenance["image"]]
            assert (image["file_name"], image["width"], image["height"], image["sha256"]) == (
                item.image_file, item.width, item.height, item.image_sha256)
            assert coco.dataset["licenses"][image["license"] - 1]["url"] == item.license
        assert sorted(coco.imgs) == sorted({i.provenance["image"] for i in items})
        assert coco.dataset["info"]["content_hash"] == release.content_hash


def test_karpathy_json(release, tmp_path):
    [entry] = annotations(write("karpathy", release, tmp_path, NONE), release)
    data = json.loads((tmp_path / entry["name"]).read_text(encoding="utf-8"))
    assert data["dataset"] == "cc-demo"
    sentences = [(img, s) for img in data["images"] for s in img["sentences"]]
    items = rows(release)
    assert [s["raw"] for _, s in sentences] == [clean(i.text) for i in items]
    assert [s["sentid"] for _, s in sentences] == list(range(len(items)))
    assert [img["imgid"] for img in data["images"]] == list(range(len(data["images"])))
    for (img, s), item in zip(sentences, items):
        assert img["split"] == item.split and img["cocoid"] == item.provenance["image"]
        assert img["filepath"] + "/" + img["filename"] == item.image_file
        assert s["imgid"] == img["imgid"] and s["sentid"] in img["sentids"]
        assert s["tokens"] == clean(item.text).lower().translate(str.maketrans("", "", string.punctuation)).split()
    premiere = next(s for _, s in sentences if s["raw"] == CC_PAIRS[0][0])
    assert premiere["tokens"][:6] == ["harrison", "ford", "and", "calista", "flockhart", "attend"]
    assert "hollywood" in premiere["tokens"] and "'hollywood" not in premiere["tokens"]


def test_jsonl_rows_with_provenance(release, tmp_path):
    [entry] = annotations(write("jsonl", release, tmp_path, NONE), release)
    lines = (tmp_path / entry["name"]).read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    records = [json.loads(line) for line in lines[:-1]]
    items = rows(release)
    assert len(records) == len(items)
    for rec, item in zip(records, items):
        assert rec["caption"] == clean(item.text) and rec["split"] == item.split
        assert rec["image_sha256"] == item.image_sha256 and rec["provenance"] == item.provenance
        assert rec["caption_id"] == item.provenance["caption"] and rec["position"] == item.position
    assert entry["size"] == (tmp_path / entry["name"]).stat().st_size


def test_csv_neutralises_formulas_and_keeps_line_breaks(release, tmp_path):
    [entry] = annotations(write("csv", release, tmp_path, NONE), release)
    with open(tmp_path / entry["name"], encoding="utf-8", newline="") as fh:
        read = list(csv.DictReader(fh))
    items = rows(release)
    assert [r["caption_id"] for r in read] == [str(i.provenance["caption"]) for i in items]
    captions = [r["caption"] for r in read]
    for formula in FORMULAS:
        assert "'" + formula in captions and formula not in captions
    assert MULTILINE in captions  # CR/LF inside a quoted cell survive
    for r, item in zip(read, items):
        expected = clean(item.text)
        if expected.startswith(("=", "+", "-", "@", "\t", "\r")):
            expected = "'" + expected
        assert r["caption"] == expected and r["split"] == item.split
        assert r["human_verified"] == ("true" if item.human_verified else "false")
    assert not any(cell.startswith(("=", "+", "-", "@")) for r in read for cell in r.values())


def test_parquet_reads_with_pyarrow_and_datasets(release, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    [entry] = annotations(write("parquet", release, tmp_path / "out", {**NONE, "row_group_size": 4}), release)
    path = tmp_path / "out" / entry["name"]
    table = pq.read_table(path)
    assert pq.ParquetFile(path).num_row_groups == (len(rows(release)) + 3) // 4
    items = rows(release)
    read = table.to_pylist()
    expected = [{"position": i.position, "image_id": i.provenance["image"], "image_sha256": i.image_sha256,
                 "file": i.image_file, "width": i.width, "height": i.height, "split": i.split,
                 "caption": clean(i.text), "caption_id": i.provenance["caption"], "license": i.license,
                 "credit": i.credit, "external_id": i.external_id, "language": i.language,
                 "human_verified": i.human_verified} for i in items]
    assert [{k: v for k, v in r.items() if k != "provenance"} for r in read] == expected
    assert [json.loads(r["provenance"]) for r in read] == [i.provenance for i in items]

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets

    loaded = datasets.load_dataset("parquet", data_files={"train": str(path)}, cache_dir=str(tmp_path / "cache"),
                                   split="train")
    assert loaded.num_rows == len(items)
    assert [{k: v for k, v in r.items() if k != "provenance"} for r in loaded] == expected


def test_webdataset_shards_read_back(release, tmp_path):
    import webdataset as wds

    files = annotations(write("webdataset", release, tmp_path, {"samples_per_shard": 3}), release)
    names = [f["name"] for f in files]
    assert names == [f"release-{release.pk}-{n:06d}.tar" for n in range(len(names))] and len(names) >= 3
    samples = list(wds.WebDataset([str(tmp_path / n) for n in names], shardshuffle=False))
    items = rows(release)
    groups = {}
    for item in items:
        groups.setdefault((item.provenance["image"], item.split), []).append(item)
    assert len(samples) == len(groups)
    seen = []
    for sample in samples:
        meta = json.loads(sample["json"])
        group = groups[(meta["image_id"], meta["split"])]
        assert sample["__key__"] == f"{group[0].position:09d}"
        ext = "jpg" if group[0].image_format == "JPEG" else "png"
        assert sha(sample[ext]) == group[0].image_sha256 == meta["image_sha256"]
        assert [c["caption"] for c in meta["captions"]] == [clean(i.text) for i in group]
        assert [c["caption_id"] for c in meta["captions"]] == [i.provenance["caption"] for i in group]
        seen += [c["position"] for c in meta["captions"]]
    assert seen == [i.position for i in items]
    # A byte budget splits shards too.
    by_size = annotations(write("webdataset", release, tmp_path / "bysize", {"shard_size": 1}), release)
    assert len(by_size) == len(groups)


def test_every_format_is_byte_identical_on_a_second_write(release, tmp_path):
    for fmt in (*FORMATS, "manifest"):
        options = {"samples_per_shard": 4} if fmt == "webdataset" else {"shard_size": 4000}
        first = write(fmt, release, tmp_path / fmt / "a", options)
        second = write(fmt, release, tmp_path / fmt / "b", options)
        assert first == second, fmt
        if fmt not in ("webdataset", "manifest"):
            assert sum(f["name"].endswith(".tar") for f in first) > 1, fmt  # several images shards
        for entry in first:
            assert (tmp_path / fmt / "a" / entry["name"]).read_bytes() == (tmp_path / fmt / "b" / entry["name"]).read_bytes()


def test_manifest_hash_is_the_content_hash(release, tmp_path):
    [entry] = write("manifest", release, tmp_path, {})
    assert entry["sha256"] == release.content_hash
    lines = (tmp_path / entry["name"]).read_bytes().split(b"\n")
    assert json.loads(lines[0])["config"] == release.config
    assert len(lines) == len(rows(release)) + 2  # header, items, the empty string after the last newline


def test_control_characters_are_stripped_and_recorded(release, tmp_path):
    stored = next(i for i in rows(release) if i.text == CONTROL)
    for fmt in FORMATS:
        report = []
        files = annotations(write(fmt, release, tmp_path / fmt, {"report": report}), release)
        entries = [e for e in report if e["code"] == "invalid_characters"]
        assert entries and entries[0]["removed"] == ["U+0007", "U+000B", "U+001B"], fmt
        assert entries[0]["position"] == stored.position
        for entry in files:
            data = (tmp_path / fmt / entry["name"]).read_bytes()
            if "-images-" in entry["name"]:
                continue
            if fmt in ("jsonl", "coco", "karpathy", "csv"):
                # No raw control character anywhere; JSON formats may keep the provenance's copy of the
                # raw text as an escaped \u0007 (valid JSON), never the caption.
                assert b"\x07" not in data and b"\x1b" not in data, fmt
                if fmt in ("coco", "karpathy", "csv"):
                    assert b"\\u0007" not in data, fmt
    [entry] = annotations(write("jsonl", release, tmp_path / "again", NONE), release)
    text = (tmp_path / "again" / entry["name"]).read_text(encoding="utf-8")
    assert json.dumps("a bell and an escape[31m in an alt-text")[1:-1] in text


def test_missing_image_file_skip_and_fail(release, tmp_path):
    victim = rows(release)[0]
    default_storage.delete(victim.image_file)
    report = []
    files = annotations(write("webdataset", release, tmp_path / "skip", {"report": report}), release)
    report = [e for e in report if e["code"] == "missing_image"]
    assert len(report) == 1
    assert report[0]["position"] == victim.position and report[0]["file"] == victim.image_file
    import webdataset as wds

    keys = [s["__key__"] for s in wds.WebDataset([str(tmp_path / "skip" / f["name"]) for f in files],
                                                 shardshuffle=False)]
    assert f"{victim.position:09d}" not in keys and keys
    # Exports without images do not read the file at all.
    assert write("jsonl", release, tmp_path / "jsonl", NONE)
    release.config = {**release.config, "missing_image": "fail"}
    with pytest.raises(ReleaseError) as info:
        write("webdataset", release, tmp_path / "fail", {})
    assert info.value.field == "missing_images" and victim.image_file in info.value.message
    assert not any((tmp_path / "fail").iterdir())  # nothing half-written is visible


def test_custom_storage_open_reads_the_bytes(release, tmp_path):
    opened = []

    def storage_open(name):
        opened.append(name)
        return default_storage.open(name, "rb")

    write("webdataset", release, tmp_path, {}, storage_open=storage_open)
    assert sorted(set(opened)) == sorted({i.image_file for i in rows(release)})


def test_bad_export_requests(release, tmp_path):
    with pytest.raises(ReleaseError) as info:
        write("tfrecord", release, tmp_path, {})
    assert info.value.field == "format"
    with pytest.raises(ReleaseError) as info:
        write("webdataset", release, tmp_path, {"samples_per_shard": 0})
    assert info.value.field == "samples_per_shard"
    draft = make_release("draft", collections=release.config["collections"])
    with pytest.raises(ReleaseError) as info:
        write("jsonl", draft, tmp_path, {})
    assert "not frozen" in info.value.message


def test_progress_is_reported(release, tmp_path):
    calls = []
    write("jsonl", release, tmp_path, {}, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (release.items_total, release.items_total)


def test_real_photo_bytes_in_shards(shared_photos, tmp_path):
    import webdataset as wds

    collection = cc_collection("photos", n_images=0)[0]
    paths = sorted(shared_photos.glob("*.jpg"))[:3]
    for n, path in enumerate(paths):
        add_caption(add_image(collection, path.read_bytes(), external_id=path.stem), CC_EXTRA[n])
    rel = make_release("photos", collections=[collection.pk], splits={"train": 1.0, "val": 0, "test": 0})
    freeze(rel)
    files = annotations(write("webdataset", rel, tmp_path, {}), rel)
    samples = list(wds.WebDataset([str(tmp_path / f["name"]) for f in files], shardshuffle=False))
    assert sorted(sha(s["jpg"]) for s in samples) == sorted(sha(p.read_bytes()) for p in paths)
