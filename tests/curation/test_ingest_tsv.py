"""Conceptual-Captions TSV import: every good row lands, every bad row is reported with its line."""
import pytest

from curation.models import Caption, Collection, Image, ImportJob

from .helpers import issues_by_line, run_import

pytestmark = pytest.mark.django_db

# Texts from seed 002 (Conceptual Captions, Table 1 and Section 3) and web titles of the shared photos.
GOOD = [
    ("actor attends the premiere of the film", "https://img.example.org/premiere.jpg"),
    ("Fireworks and Morey's Pier in North Wildwood July 2007", "https://img.example.org/fireworks.jpg"),
    ("the player dribbles the ball during a match", "http://img.example.org/match.jpg"),
]


@pytest.fixture
def collection():
    return Collection.objects.create(name="web alt-text", source_kind="alt_text")


def write(tmp_path, lines: list[bytes], name="cc.tsv"):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_clean_tsv_lands_one_pending_image_per_url_and_one_caption_per_row(tmp_path, collection):
    path = write(tmp_path, [f"{c}\t{u}".encode() for c, u in GOOD])
    job = run_import(collection, ImportJob.Kind.TSV, path, download=False)
    assert job.status == ImportJob.Status.DONE
    assert (job.rows_read, job.rows_imported, job.rows_skipped) == (3, 3, 0)
    assert Image.objects.filter(collection=collection, status=Image.Status.PENDING).count() == 3
    caption = Caption.objects.get(text=GOOD[1][0])
    assert caption.image.source_url == GOOD[1][1]
    assert (caption.origin, caption.source, caption.import_line) == ("alt_text", "cc.tsv", 2)


def test_every_kind_of_bad_row_is_reported_with_its_line_and_good_rows_still_land(tmp_path, collection):
    lines = [
        f"{GOOD[0][0]}\t{GOOD[0][1]}".encode(),                    # 1 good
        b"",                                                     # 2 empty line
        b"Boston - 00201",                                       # 3 missing column
        b"DSC_2481\thttps://img.example.org/a.jpg\textra",       # 4 extra column
        b"caf\xe9 au lait\thttps://img.example.org/b.jpg",       # 5 invalid UTF-8 (latin-1 byte)
        b"x" * (1024 * 1024) + b"\thttps://img.example.org/c.jpg",  # 6 a 1 MB caption
        b"Laugharne Castle\tftp://img.example.org/d.jpg",        # 7 not http(s)
        b"Laugharne Castle\tjavascript:alert(1)",                # 8 not http(s)
        f"{GOOD[1][0]}\t{GOOD[1][1]}".encode(),                    # 9 good
        b"   \thttps://img.example.org/e.jpg",                   # 10 empty caption
    ]
    job = run_import(collection, ImportJob.Kind.TSV, write(tmp_path, lines), download=False)
    assert job.status == ImportJob.Status.DONE
    assert issues_by_line(job) == {
        2: "empty_line", 3: "missing_column", 4: "extra_column", 5: "invalid_utf8",
        6: "line_too_long", 7: "bad_url", 8: "bad_url", 10: "empty_caption",
    }
    assert (job.rows_read, job.rows_imported, job.rows_skipped) == (10, 2, 8)
    assert set(Caption.objects.values_list("import_line", flat=True)) == {1, 9}
    messages = {i.line: i.message for i in job.issues.all()}
    assert "ftp" in messages[7] and "1 columns" not in messages[3]


def test_a_caption_over_the_character_limit_is_refused_even_when_the_line_fits(tmp_path, collection, settings):
    settings.INGEST_MAX_CAPTION_CHARS = 100
    job = run_import(collection, ImportJob.Kind.TSV,
                     write(tmp_path, [b"y" * 150 + b"\thttps://img.example.org/long.jpg"]), download=False)
    assert issues_by_line(job) == {1: "caption_too_long"}


def test_importing_the_same_file_twice_creates_no_duplicates(tmp_path, collection):
    lines = [f"{c}\t{u}".encode() for c, u in GOOD] + [f"{GOOD[0][0]}\t{GOOD[0][1]}".encode()]
    path = write(tmp_path, lines)
    first = run_import(collection, ImportJob.Kind.TSV, path, download=False)
    second = run_import(collection, ImportJob.Kind.TSV, path, download=False)
    assert (first.rows_imported, first.rows_duplicate) == (3, 1)
    assert (second.rows_imported, second.rows_duplicate) == (0, 4)
    assert Image.objects.filter(collection=collection).count() == 3
    assert Caption.objects.filter(image__collection=collection).count() == 3


def test_two_captions_for_one_url_share_one_image(tmp_path, collection):
    url = "https://img.example.org/castle.jpg"
    path = write(tmp_path, [f"Laugharne Castle\t{url}".encode(), f"castle on a hill by the sea\t{url}".encode()])
    run_import(collection, ImportJob.Kind.TSV, path, download=False)
    image = Image.objects.get(source_url=url)
    assert sorted(image.captions.values_list("text", flat=True)) == ["Laugharne Castle", "castle on a hill by the sea"]


def test_a_nul_byte_in_a_caption_is_reported_not_crashing_postgres(tmp_path, collection):
    job = run_import(collection, ImportJob.Kind.TSV,
                     write(tmp_path, [b"bad\x00caption\thttps://img.example.org/n.jpg", b"ok caption\thttps://img.example.org/o.jpg"]),
                     download=False)
    assert issues_by_line(job) == {1: "invalid_characters"}
    assert "\\x00" in job.issues.get().item
    assert job.rows_imported == 1


@pytest.mark.django_db(transaction=True)
def test_the_threaded_postgres_writer_lands_the_same_rows(tmp_path, settings):
    """Outside a transaction the PostgreSQL path writes batches from a second thread."""
    settings.INGEST_BATCH_SIZE = 2
    collection = Collection.objects.create(name="threaded")
    lines = [f"caption number {i} of a dog\thttps://img.example.org/{i % 3}.jpg".encode() for i in range(7)]
    job = run_import(collection, ImportJob.Kind.TSV, write(tmp_path, lines), download=False)
    assert (job.status, job.rows_read, job.rows_imported) == ("done", 7, 7)
    assert Image.objects.filter(collection=collection).count() == 3


def test_a_redelivered_import_after_a_worker_crash_finishes_without_duplicates(tmp_path, collection, settings,
                                                                                monkeypatch):
    """acks_late re-delivers the task of a worker killed mid-import: the rerun lands only what is
    missing and reports the whole file once."""
    settings.INGEST_BATCH_SIZE = 2
    lines = [f"caption {i}\thttps://img.example.org/{i}.jpg".encode() for i in range(5)] + [b"broken line"]
    path = write(tmp_path, lines)
    job = ImportJob.objects.create(collection=collection, kind=ImportJob.Kind.TSV, source_path=str(path),
                                   source_name="cc.tsv", options={"download": False})
    from curation.ingest import runner, writer

    calls = {"n": 0}
    real = writer.write_url_rows

    def crash_on_second_batch(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise SystemExit("worker killed")
        return real(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(writer, "write_url_rows", crash_on_second_batch)
        with pytest.raises(SystemExit):
            runner.import_run(job.pk)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.RUNNING and Caption.objects.count() == 2
    job = runner.import_run(job.pk)
    assert (job.status, job.rows_read, job.rows_imported, job.rows_skipped) == ("done", 6, 5, 1)
    assert Caption.objects.count() == 5 and job.issues.count() == 1
