"""COCO captions JSON and AVA-style comment dumps."""
import json

import pytest

from curation.models import Caption, Collection, Image, ImportJob

from .helpers import jpeg_bytes, run_import

pytestmark = pytest.mark.django_db


@pytest.fixture
def collection():
    return Collection.objects.create(name="coco")


def coco_doc():
    return {
        "licenses": [{"id": 4, "name": "Attribution License", "url": "http://creativecommons.org/licenses/by/2.0/"}],
        "images": [
            {"id": 391895, "file_name": "COCO_val2014_000000391895.jpg", "license": 4, "width": 80, "height": 60},
            {"id": 522418, "file_name": "COCO_val2014_000000522418.jpg", "license": 4},
            {"id": 184613, "coco_url": "http://images.cocodataset.org/val2014/COCO_val2014_000000184613.jpg"},
            {"file_name": "no-id.jpg"},
        ],
        "annotations": [
            {"image_id": 391895, "id": 1, "caption": "A man with a red helmet on a small moped on a dirt road."},
            {"image_id": 391895, "id": 2, "caption": "Man riding a motor bike on a dirt road on the countryside."},
            {"image_id": 522418, "id": 3, "caption": "A woman wearing a net on her head cutting a cake."},
            {"image_id": 999, "id": 4, "caption": "An orphan caption."},
            {"image_id": 184613, "id": 5},
            {"image_id": 184613, "id": 6, "caption": "A child holding a flowered umbrella and petting a yak."},
        ],
    }


def test_a_coco_file_lands_images_and_captions_and_reports_bad_entries(tmp_path, collection):
    images_dir = tmp_path / "val2014"
    images_dir.mkdir()
    (images_dir / "COCO_val2014_000000391895.jpg").write_bytes(jpeg_bytes(size=(80, 60)))
    path = tmp_path / "captions_val2014.json"
    path.write_text(json.dumps(coco_doc()))
    job = run_import(collection, ImportJob.Kind.COCO, path, images_dir=str(images_dir), download=False)
    assert job.status == "done"
    moped = Image.objects.get(external_id="391895")
    assert moped.status == Image.Status.READY and moped.license == "Attribution License"
    assert moped.captions.count() == 2 and moped.captions.first().origin == "dataset"
    codes = {issue.item: issue.code for issue in job.issues.all()}
    assert codes == {
        "images[1]": "file_not_found", "images[3]": "missing_field",
        "annotations[3]": "unknown_image", "annotations[4]": "missing_field", "annotations[2]": "unknown_image",
    }
    yak = Image.objects.get(external_id="184613")
    assert yak.status == Image.Status.PENDING and yak.source_url.endswith("184613.jpg")
    assert Caption.objects.filter(image__collection=collection).count() == 3


def test_a_coco_file_that_is_not_coco_fails_clearly(tmp_path, collection):
    path = tmp_path / "x.json"
    path.write_text('{"images": 3}')
    job = run_import(collection, ImportJob.Kind.COCO, path)
    assert job.status == "failed" and "images" in job.error
    path.write_text("{not json")
    assert run_import(collection, ImportJob.Kind.COCO, path).status == "failed"


def test_a_comment_dump_attaches_comments_to_images_by_id_and_reports_bad_lines(tmp_path, collection):
    # Comments in the style seed 000 quotes from photo-site critiques.
    dump = tmp_path / "ava_comments.txt"
    dump.write_bytes(
        b"953619\tI like the way the light falls on the subject's face.\n"
        b"953619\tGreat photo!\n"
        b"953619\tGreat photo!\n"
        b"no tab in this line\n"
        b"\n"
        b"953958\tThe composition would be stronger with the horizon lower; colours are lovely.\n"
        b"\tcomment without an id\n"
    )
    job = run_import(collection, ImportJob.Kind.COMMENTS, dump)
    assert job.status == "done"
    assert {issue.line: issue.code for issue in job.issues.all()} == {
        1: "placeholder_image", 4: "missing_column", 5: "empty_line", 6: "placeholder_image", 7: "bad_image_id"}
    assert (job.rows_imported, job.rows_duplicate) == (3, 1)
    image = Image.objects.get(external_id="953619")
    assert image.status == Image.Status.MISSING
    assert image.captions.filter(origin="web_comment").count() == 2
