"""Folder and zip imports: real photographs land with thumbnails; broken, hostile and oversized
files are reported by name and never stop the rest."""
import csv

import pytest
from PIL import Image as PILImage

from curation.ingest.images import verify_image
from curation.ingest.report import RowError
from curation.models import Caption, Collection, Image, ImportJob

from .helpers import jpeg_bytes, make_zip, png_bytes, run_import, sidecar_csv

pytestmark = pytest.mark.django_db


@pytest.fixture
def collection():
    return Collection.objects.create(name="uploads")


def _codes(job):
    return {issue.item: issue.code for issue in job.issues.all()}


def test_real_photographs_with_their_web_titles_land_with_thumbnails(tmp_path, collection, shared_photos):
    with open(shared_photos / "credits.csv", newline="", encoding="utf-8") as fh:
        credits = list(csv.DictReader(fh))[:6]
    members = {f"{row['ImageID']}.jpg": (shared_photos / f"{row['ImageID']}.jpg").read_bytes() for row in credits}
    members["captions.csv"] = sidecar_csv([
        {"file": f"{row['ImageID']}.jpg", "caption": row["Title"], "license": row["License"], "credit": row["Author"]}
        for row in credits
    ])
    job = run_import(collection, ImportJob.Kind.IMAGES, make_zip(tmp_path / "photos.zip", members))
    assert (job.status, job.rows_imported, job.rows_skipped) == ("done", 6, 0), list(job.issues.values())
    boston = Image.objects.get(external_id="000adef7197e3118")
    assert boston.format == "JPEG" and boston.width > 400 and boston.height > 0
    assert len(boston.sha256) == 64 and boston.file and boston.thumbnail
    assert boston.credit == "Chris Owen" and "by/2.0" in boston.license
    assert boston.captions.get().text == "Boston - 00201"
    with boston.thumbnail.open("rb") as fh, PILImage.open(fh) as thumb:
        assert max(thumb.size) <= 320


def test_hostile_and_broken_members_are_reported_and_good_ones_land(tmp_path, collection):
    good = jpeg_bytes()
    truncated = jpeg_bytes(size=(400, 300))[:600]
    members = {
        "good.jpg": good,
        "truncated.jpg": truncated,
        "notes.jpg": b"this is a text file with an image extension\n",
        "readme.txt": b"hello",
        "../escape.png": png_bytes(color=(1, 2, 3)),
        "/etc/absolute.png": png_bytes(color=(4, 5, 6)),
        "sub/../../../climb.png": png_bytes(color=(7, 8, 9)),
        "drawing.svg": b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
    }
    job = run_import(collection, ImportJob.Kind.IMAGES, make_zip(tmp_path / "mixed.zip", members))
    assert job.status == "done"
    codes = _codes(job)
    assert codes["truncated.jpg"] == "truncated_image"
    assert codes["notes.jpg"] == "not_an_image"
    assert codes["readme.txt"] == "not_an_image"
    assert codes["../escape.png"] == "unsafe_path"
    assert codes["/etc/absolute.png"] == "unsafe_path"
    assert codes["sub/../../../climb.png"] == "unsafe_path"
    assert codes["drawing.svg"] == "not_an_image"
    assert Image.objects.filter(collection=collection).count() == 1
    assert not (tmp_path / "escape.png").exists() and not (tmp_path.parent / "escape.png").exists()


def test_a_decompression_bomb_is_refused_with_pillows_limit_still_on(tmp_path, collection):
    assert PILImage.MAX_IMAGE_PIXELS and PILImage.MAX_IMAGE_PIXELS < 100_000_000
    bomb = tmp_path / "bomb.png"
    PILImage.new("1", (12_000, 12_000)).save(bomb)  # 144 Mpx of white in a few kB
    assert bomb.stat().st_size < 100_000
    with pytest.raises(RowError) as err:
        verify_image(bomb.read_bytes())
    assert err.value.code == "decompression_bomb"
    job = run_import(collection, ImportJob.Kind.IMAGES,
                     make_zip(tmp_path / "b.zip", {"bomb.png": bomb.read_bytes(), "ok.png": png_bytes()}))
    assert _codes(job) == {"bomb.png": "decompression_bomb"}
    assert job.rows_imported == 1


def test_an_image_over_the_byte_limit_is_refused(tmp_path, collection, settings):
    settings.INGEST_MAX_IMAGE_BYTES = 1000
    big = jpeg_bytes(size=(600, 600))
    assert len(big) > 1000
    job = run_import(collection, ImportJob.Kind.IMAGES, make_zip(tmp_path / "big.zip", {"big.jpg": big}))
    assert _codes(job) == {"big.jpg": "too_large"}


def test_sidecar_rows_attach_captions_and_bad_sidecar_rows_are_reported(tmp_path, collection):
    members = {
        "a.png": png_bytes(color=(10, 10, 10)),
        "captions.csv": sidecar_csv([
            {"file": "a.png", "caption": "stock photo of a black square"},
            {"file": "a.png", "caption": "IMG_0042"},
            {"file": "missing.png", "caption": "a photo that is not in the zip"},
            {"file": "a.png", "caption": ""},
        ]),
    }
    job = run_import(collection, ImportJob.Kind.IMAGES, make_zip(tmp_path / "s.zip", members), origin="alt_text")
    image = Image.objects.get()
    assert sorted(image.captions.values_list("text", flat=True)) == ["IMG_0042", "stock photo of a black square"]
    codes = {(issue.line, issue.code) for issue in job.issues.all()}
    assert codes == {(4, "file_not_found"), (5, "empty_caption")}


def test_the_same_zip_twice_and_the_same_picture_under_two_names_make_one_image(tmp_path, collection):
    data = png_bytes(color=(90, 90, 90))
    path = make_zip(tmp_path / "dup.zip", {"one.png": data, "copy/two.png": data,
                                           "captions.csv": sidecar_csv([{"file": "one.png", "caption": "grey"}])})
    first = run_import(collection, ImportJob.Kind.IMAGES, path)
    second = run_import(collection, ImportJob.Kind.IMAGES, path)
    assert Image.objects.filter(collection=collection).count() == 1
    assert Caption.objects.count() == 1
    assert (first.rows_imported, first.rows_duplicate) == (1, 1)
    assert (second.rows_imported, second.rows_duplicate) == (0, 2)


def test_a_file_that_is_not_a_zip_fails_the_job_with_a_clear_error(tmp_path, collection):
    path = tmp_path / "fake.zip"
    path.write_bytes(b"not a zip at all")
    job = run_import(collection, ImportJob.Kind.IMAGES, path)
    assert job.status == "failed" and "zip" in job.error


def test_a_folder_import_fills_placeholders_left_by_a_comment_dump(tmp_path, collection):
    dump = tmp_path / "comments.txt"
    dump.write_text("photo1\tWhat a lovely composition, the light on the water is great\n")
    run_import(collection, ImportJob.Kind.COMMENTS, dump)
    placeholder = Image.objects.get(external_id="photo1")
    assert placeholder.status == Image.Status.MISSING
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "photo1.jpg").write_bytes(jpeg_bytes())
    job = run_import(collection, ImportJob.Kind.IMAGES, folder)
    assert job.rows_imported == 1
    placeholder.refresh_from_db()
    assert placeholder.status == Image.Status.READY and placeholder.captions.count() == 1
