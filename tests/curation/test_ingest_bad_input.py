"""Bad input at import: every line that cannot land is reported with its line number and a reason;
what can land lands unchanged (HTML is text, shown escaped); nothing is lost silently.

The texts are realistic alt-text and photo-critique lines written for this test."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from curation.models import Caption, Collection, Image, ImportJob

from .helpers import issues_by_line, run_import

pytestmark = pytest.mark.django_db

EMOJI_ONLY = "\U0001F436\u2764\ufe0f\U0001F30A"
HTML = 'Sunset over the harbour <script>alert("x")</script><b>bold</b>'
MIXED = "Tokyo street at night 東京の夜 with neon signs"


@pytest.fixture
def photos():
    """A collection that already has its photos (ids 501-503), as after an image import."""
    collection = Collection.objects.create(name="critiques", source_kind="comments")
    for ext in ("501", "502", "503"):
        Image.objects.create(collection=collection, external_id=ext, status="ready", width=640, height=480,
                             format="JPEG", sha256=ext.rjust(64, "0"))
    return collection


def _dump(tmp_path, lines: list[str]):
    path = tmp_path / "comments.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_comments_on_unknown_ids_are_reported_per_line_and_skipped_when_asked(tmp_path, photos):
    path = _dump(tmp_path, [
        "501\tThe leading line of the pier pulls the eye straight to the lighthouse.",
        "999\tLovely soft light on the dunes.",  # a typo'd id
        "502\tThe horizon is tilted to the left; straighten it in post.",
        "999\tAgree, the dunes glow.",
        "7777\tToo much noise in the shadows.",
    ])
    job = run_import(photos, ImportJob.Kind.COMMENTS, path, unknown_images="skip")
    assert job.status == "done"
    assert issues_by_line(job) == {2: "unknown_image", 4: "unknown_image", 5: "unknown_image"}
    assert "'999'" in job.issues.get(line=2).message
    assert (job.rows_imported, job.rows_skipped) == (2, 3)
    assert not Image.objects.filter(collection=photos, external_id__in=["999", "7777"]).exists()


def test_by_default_an_unknown_id_gets_a_placeholder_and_a_warning_on_the_line_that_made_it(tmp_path, photos):
    path = _dump(tmp_path, [
        "501\tNice framing.",
        "888\tThe crop cuts the subject's feet.",
        "888\tColours are muddy.",
    ])
    job = run_import(photos, ImportJob.Kind.COMMENTS, path)
    assert issues_by_line(job) == {2: "placeholder_image"}
    assert job.issues.get(line=2).severity == "warning"
    placeholder = Image.objects.get(collection=photos, external_id="888")
    assert placeholder.status == Image.Status.MISSING and placeholder.captions.count() == 2
    assert job.rows_imported == 3


def test_the_option_is_refused_where_it_does_not_apply_and_for_unknown_values(tmp_path, photos):
    from curation.errors import IngestError
    from curation.services import import_create

    path = _dump(tmp_path, ["501\tok"])
    with pytest.raises(IngestError, match="unknown_images"):
        import_create(collection=photos, kind=ImportJob.Kind.COMMENTS, source_path=str(path),
                      options={"unknown_images": "invent"})
    with pytest.raises(IngestError, match="unknown_images"):
        import_create(collection=photos, kind=ImportJob.Kind.TSV, source_path=str(path),
                      options={"unknown_images": "skip"})


@pytest.mark.django_db(transaction=True)  # the command queues the import on commit, then waits for it
def test_the_cli_takes_the_unknown_images_option(tmp_path, photos, eager_celery):
    path = _dump(tmp_path, ["503\tGood use of negative space.", "404\tWhere is this?"])
    out = StringIO()
    call_command("import_comments", str(path), "--collection", "critiques", "--unknown-images", "skip", stdout=out)
    assert "unknown_image" in out.getvalue() and "line 2" in out.getvalue()
    job = ImportJob.objects.latest("pk")
    assert job.options["unknown_images"] == "skip" and job.rows_imported == 1


def test_empty_invisible_oversized_and_control_character_captions_are_reported_and_the_rest_land(
        tmp_path, photos, settings):
    settings.INGEST_MAX_CAPTION_CHARS = 20_000
    huge = "a very long description " * 45_000  # about 1 MB on one line
    path = _dump(tmp_path, [
        "501\t   ",                      # whitespace only
        "501\t\u200b\u200d\ufeff",       # zero-width marks only: nothing visible
        "501\t\u00a0\u2003",             # no-break and em spaces
        f"501\t{huge}",                 # over the line cap: consumed to its end, reported once
        "501\tbroken\x00caption",
        f"502\t{EMOJI_ONLY}",            # kept: the text filters decide about pictographs
        f"502\t{HTML}",                  # kept as text
        f"503\t{MIXED}",                 # kept
        "503\t" + "long " * 5_000,       # 25,000 characters: over the caption limit, under the line cap
    ])
    job = run_import(photos, ImportJob.Kind.COMMENTS, path)
    assert job.status == "done"
    assert issues_by_line(job) == {1: "empty_caption", 2: "empty_caption", 3: "empty_caption",
                                   4: "line_too_long", 5: "invalid_characters", 9: "caption_too_long"}
    assert "no visible characters" in job.issues.get(line=2).message
    assert set(Caption.objects.filter(import_job=job).values_list("text", flat=True)) == {EMOJI_ONLY, HTML, MIXED}
    assert job.rows_imported + job.rows_skipped == 9


def test_html_in_a_caption_is_shown_as_text_on_the_image_page_and_the_report(tmp_path, photos, alice_client):
    path = _dump(tmp_path, [f"501\t{HTML}", "501\t\u200b"])
    job = run_import(photos, ImportJob.Kind.COMMENTS, path)
    image = Image.objects.get(collection=photos, external_id="501")
    page = alice_client.get(image.get_absolute_url()).content.decode()
    assert "&lt;script&gt;alert(" in page and '<script>alert("x")' not in page
    report = alice_client.get(reverse("import-detail", args=[job.pk]))
    assert report.status_code == 200 and "empty_caption" in report.content.decode()
    api = alice_client.get(f"/api/imports/{job.pk}/report/")
    assert api.status_code == 200 and "empty_caption" in api.content.decode()


def test_the_import_form_offers_the_unknown_id_choice_for_comment_dumps(alice_client):
    page = alice_client.get(reverse("import-create")).content.decode()
    assert 'name="unknown_images"' in page and "options-comments" in page
