"""An import's bar moves with the rows it reads: Tomás imports a 9,000-row alt-text file (one database batch of
10,000 rows) and a comment dump, and the progress the page polls climbs in steps of PROGRESS_ROWS rows instead of
jumping from nothing (or 45%) to 100% when the batch lands."""
import pytest

from curation.ingest import runner
from curation.models import Caption, Collection, Image, ImportJob

pytestmark = pytest.mark.django_db


def _import(tmp_path, kind, lines, collection, name):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    job = ImportJob.objects.create(collection=collection, kind=kind, source_path=str(path), source_name=name,
                                   options={"download": False})
    seen = []

    def on_progress(job):
        job.refresh_from_db()
        seen.append((job.rows_read, job.percent))

    return runner.import_run(job.pk, on_progress=on_progress), seen


def test_a_tsv_import_counts_rows_as_they_are_read(tmp_path, settings):
    settings.INGEST_BATCH_SIZE = 10_000
    collection = Collection.objects.create(name="harbour alt-text", source_kind="alt_text")
    lines = [f"fishing boat number {i} moored at the quay\thttps://img.example.org/boats/{i}.jpg".encode()
             for i in range(9_000)]
    lines[4_321] = b"a row without its url"
    job, seen = _import(tmp_path, ImportJob.Kind.TSV, lines, collection, "boats.tsv")
    assert (job.status, job.rows_read, job.rows_imported, job.rows_skipped) == ("done", 9_000, 8_999, 1)
    reads = [read for read, _ in seen]
    assert reads[:4] == [2_000, 4_000, 6_000, 8_000] and reads[-1] == 9_000
    percents = [percent for _, percent in seen]
    assert percents == sorted(percents) and len(set(percents)) >= 5  # a bar that climbs, not one jump


def test_a_comment_dump_counts_rows_as_they_are_read(tmp_path, settings):
    settings.INGEST_BATCH_SIZE = 10_000
    collection = Collection.objects.create(name="photo critiques", source_kind="comments")
    for i in range(3):
        Image.objects.create(collection=collection, external_id=f"ph{i}", status="ready")
    lines = [f"ph{i % 3}\tthe light on the water in shot {i} is lovely".encode() for i in range(5_000)]
    job, seen = _import(tmp_path, ImportJob.Kind.COMMENTS, lines, collection, "critiques.tsv")
    assert (job.status, job.rows_read, job.rows_imported) == ("done", 5_000, 5_000)
    assert [read for read, _ in seen][:2] == [2_000, 4_000]
    assert Caption.objects.filter(image__collection=collection).count() == 5_000
