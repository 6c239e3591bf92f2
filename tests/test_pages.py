"""The server-rendered pages: who may open which, what each shows, and the htmx fragments."""
import io
import re
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image as PILImage

from curation.models import Caption, Collection, Image, ImportIssue, ImportJob

pytestmark = pytest.mark.django_db

CURATOR_PAGES = [
    ("collection-list", None),
    ("collection-create", None),
    ("collection-detail", "collection"),
    ("image-detail", "image"),
    ("import-list", None),
    ("import-create", None),
    ("import-detail", "job"),
    ("import-progress", "job"),
]


def png_bytes(color=(200, 40, 40), size=(24, 16)) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def zip_of_pngs(count=3, extra: dict[str, bytes] | None = None) -> bytes:
    """A zip of ``count`` distinct PNGs with a sidecar captions.csv, plus any ``extra`` members."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        rows = ["file,caption"]
        for i in range(count):
            archive.writestr(f"photo-{i}.png", png_bytes(color=(40 * i, 120, 255 - 40 * i)))
            rows.append(f"photo-{i}.png,A test photo number {i}")
        archive.writestr("captions.csv", "\n".join(rows) + "\n")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def eager_celery(settings):
    """Run tasks in the test process even when REDIS_URL points at a real broker."""
    from config.celery import app

    previous = app.conf.task_always_eager
    settings.CELERY_TASK_ALWAYS_EAGER = True
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = previous


@pytest.fixture
def collection(alice):
    return Collection.objects.create(name="Street photos", created_by=alice)


@pytest.fixture
def image(collection):
    return Image.objects.create(
        collection=collection, sha256="ab" * 32, width=640, height=480, format="JPEG",
        file_size=12345, source_url="https://example.org/cat.jpg", external_id="cat-1",
        license="CC BY 2.0", credit="Jane Doe",
    )


@pytest.fixture
def job(collection, alice):
    return ImportJob.objects.create(
        collection=collection, kind=ImportJob.Kind.TSV, source_name="pairs.tsv",
        status=ImportJob.Status.RUNNING, rows_total=200, rows_read=100, created_by=alice,
    )


def url_for(name, kind, request):
    return reverse(name, args=[request.getfixturevalue(kind).pk]) if kind else reverse(name)


# --- Who may open what --------------------------------------------------------------------------


@pytest.mark.parametrize("name,kind", CURATOR_PAGES + [("home", None)])
def test_anonymous_visitors_are_sent_to_the_login_page(client, request, name, kind):
    url = url_for(name, kind, request)
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize("name,kind", CURATOR_PAGES)
def test_annotators_are_refused_curator_pages_with_a_friendly_403(bob_client, request, name, kind):
    response = bob_client.get(url_for(name, kind, request))
    assert response.status_code == 403
    assert "This page is not for your role" in response.content.decode()
    assert "curator role" in response.content.decode()


@pytest.mark.parametrize("name,kind", CURATOR_PAGES)
def test_curators_open_every_curator_page(alice_client, request, name, kind):
    assert alice_client.get(url_for(name, kind, request)).status_code == 200


@pytest.mark.parametrize("name,kind", CURATOR_PAGES)
def test_admins_open_every_curator_page_too(client, carol, request, name, kind):
    client.force_login(carol)
    assert client.get(url_for(name, kind, request)).status_code == 200


def test_users_without_a_role_are_refused_curator_pages(client, dave):
    client.force_login(dave)
    assert client.get(reverse("collection-list")).status_code == 403
    assert "has no role yet" in client.get(reverse("home")).content.decode()


def test_an_unknown_page_renders_the_404_template(alice_client):
    response = alice_client.get("/no/such/page/")
    assert response.status_code == 404
    assert "Nothing here" in response.content.decode()


# --- Login and the navigation -------------------------------------------------------------------


def test_the_login_form_signs_a_curator_in_and_sends_them_home(client, alice):
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert 'name="username"' in page.content.decode()
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-pw-123"})
    assert response.status_code == 302
    assert response.url == reverse("home")


def test_a_wrong_password_shows_an_error_on_the_login_page(client, alice):
    response = client.post(reverse("login"), {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "alert-error" in response.content.decode()


def test_logout_is_a_post_form_in_the_navigation(alice_client):
    html = alice_client.get(reverse("home")).content.decode()
    assert re.search(r'<form method="post" action="%s"' % re.escape(reverse("logout")), html)
    response = alice_client.post(reverse("logout"))
    assert response.status_code == 302
    assert alice_client.get(reverse("home")).status_code == 302


def test_the_page_carries_htmx_from_static_files_and_its_csrf_header(alice_client):
    html = alice_client.get(reverse("home")).content.decode()
    assert "/static/vendor/htmx.min.js" in html
    assert "hx-headers='{\"X-CSRFToken\": \"" in html
    assert "cdn" not in html.lower()


def test_the_navigation_shows_curator_links_to_curators_only(alice_client, bob, client):
    assert reverse("import-create") in alice_client.get(reverse("home")).content.decode()
    client.force_login(bob)
    html = client.get(reverse("home")).content.decode()
    assert reverse("import-create") not in html
    assert reverse("collection-list") not in html


# --- Home per role ------------------------------------------------------------------------------


def test_an_annotator_home_welcomes_them_and_says_there_are_no_campaigns_yet(bob_client):
    html = bob_client.get(reverse("home")).content.decode()
    assert "Welcome, bob" in html
    assert "No campaigns yet" in html
    assert "Write captions" in html


def test_a_curator_home_lists_collections_with_counts_and_recent_imports(alice_client, image, job):
    Caption.objects.create(image=image, text="a cat", origin=Caption.Origin.ALT_TEXT)
    html = alice_client.get(reverse("home")).content.decode()
    assert "Street photos" in html
    assert "1 image · 1 caption" in html
    assert "pairs.tsv" in html and "Reading rows · 25%" in html
    assert reverse("import-create") in html and reverse("collection-create") in html
    assert "Django admin" not in html


def test_an_admin_home_adds_users_per_role_and_links_to_admin_and_api_docs(client, carol, alice, bob, dave):
    client.force_login(carol)
    html = client.get(reverse("home")).content.decode()
    assert "Recent imports" in html
    assert reverse("admin:index") in html and reverse("api-docs") in html
    users = html[html.index('id="users"'):]
    assert re.search(r'stat-value">4</span><span class="stat-label">active users', users)
    assert re.search(r'stat-value">1</span><span class="stat-label">curator<', users)
    assert re.search(r'stat-value">1</span><span class="stat-label">without a role', users)


# --- Collections --------------------------------------------------------------------------------


def test_a_curator_creates_a_collection_and_lands_on_it(alice_client):
    response = alice_client.post(reverse("collection-create"), {
        "name": "Museum", "description": "", "source_kind": "museum", "language": "en",
    })
    collection = Collection.objects.get(name="Museum")
    assert response.status_code == 302 and response.url == collection.get_absolute_url()
    assert collection.created_by.username == "alice"


def test_a_duplicate_collection_name_is_refused_with_the_services_message(alice_client, collection):
    response = alice_client.post(reverse("collection-create"), {
        "name": "Street photos", "source_kind": "upload", "language": "en",
    })
    assert response.status_code == 400
    assert "already exists" in response.content.decode()


def test_the_collection_grid_shows_thumbnails_badges_and_caption_counts(alice_client, collection):
    ready = Image.objects.create(collection=collection, sha256="1" * 64, format="PNG",
                                 file="images/x.png", thumbnail="thumbs/x.jpg")
    Image.objects.create(collection=collection, source_url="https://example.org/a.jpg",
                         status=Image.Status.PENDING)
    Image.objects.create(collection=collection, source_url="https://example.org/b.jpg",
                         status=Image.Status.FAILED)
    Caption.objects.create(image=ready, text="one", origin=Caption.Origin.ALT_TEXT)
    Caption.objects.create(image=ready, text="two", origin=Caption.Origin.CROWD)
    html = alice_client.get(reverse("collection-detail", args=[collection.pk])).content.decode()
    assert f'src="{reverse("image-thumbnail", args=[ready.pk])}"' in html
    assert "Waiting for download" in html and "Download failed" in html
    assert "2 captions" in html


def test_the_collection_grid_filters_by_status(alice_client, collection):
    Image.objects.create(collection=collection, external_id="ready-one", sha256="1" * 64)
    Image.objects.create(collection=collection, external_id="pending-one", status=Image.Status.PENDING)
    html = alice_client.get(reverse("collection-detail", args=[collection.pk]), {"status": "pending"}).content.decode()
    assert "pending-one" in html and "ready-one" not in html


def test_the_collection_grid_shows_sixty_images_a_page(alice_client, collection):
    Image.objects.bulk_create(
        Image(collection=collection, external_id=f"img-{i:03}", status=Image.Status.MISSING) for i in range(61)
    )
    url = reverse("collection-detail", args=[collection.pk])
    first = alice_client.get(url).content.decode()
    assert first.count('class="tile"') == 60 and "Page 1 of 2" in first
    second = alice_client.get(url, {"page": 2}).content.decode()
    assert second.count('class="tile"') == 1 and "img-060" in second


def test_an_htmx_request_for_the_collection_gets_only_the_grid(alice_client, collection):
    response = alice_client.get(reverse("collection-detail", args=[collection.pk]), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert 'id="image-grid"' in html
    assert "<html" not in html


# --- The image page -----------------------------------------------------------------------------


def test_the_image_page_shows_the_image_its_metadata_and_captions(alice_client, image):
    Caption.objects.create(image=image, text="a grey cat on a sofa", origin=Caption.Origin.ALT_TEXT, source="cats.tsv")
    html = alice_client.get(reverse("image-detail", args=[image.pk])).content.decode()
    assert "ab" * 32 in html
    assert "640 × 480 px" in html and "12.1\xa0KB" in html
    assert "CC BY 2.0" in html and "Jane Doe" in html and "cat-1" in html
    assert '<a href="https://example.org/cat.jpg" rel="noopener noreferrer nofollow"' in html
    assert "a grey cat on a sofa" in html and "Web alt-text" in html and "cats.tsv" in html


def test_the_image_page_shows_the_file_from_the_image_file_url(alice_client, image):
    image.file = "images/ab/x.jpg"
    image.save()
    html = alice_client.get(reverse("image-detail", args=[image.pk])).content.decode()
    assert f'src="{reverse("image-file", args=[image.pk])}"' in html


def test_each_caption_shows_its_lineage_back_to_the_raw_text(alice_client, image):
    raw = Caption.objects.create(image=image, text="Barack Obama in Chicago", origin=Caption.Origin.ALT_TEXT,
                                 source="alt.tsv")
    hyper = Caption.objects.create(image=image, text="actor in city", origin=Caption.Origin.TRANSFORMED,
                                   parent=raw, source="hypernymize v1")
    Caption.objects.create(image=image, text="an actor in a city", origin=Caption.Origin.CROWD, parent=hyper,
                           source="campaign 3")
    html = alice_client.get(reverse("image-detail", args=[image.pk])).content.decode()
    chain = html[html.index("Lineage: 3 steps"):]
    positions = [chain.index(text) for text in ("an actor in a city", "actor in city", "Barack Obama in Chicago")]
    assert positions == sorted(positions)
    assert "hypernymize v1" in chain and "raw text" in chain


def test_a_source_url_that_is_not_http_is_shown_as_text_not_a_link(alice_client, image):
    image.source_url = "javascript:alert(1)"
    image.save()
    html = alice_client.get(reverse("image-detail", args=[image.pk])).content.decode()
    assert "javascript:alert(1)" in html
    assert 'href="javascript:' not in html


def test_user_text_with_script_tags_is_escaped_on_the_image_page(alice_client, image):
    evil = '<script>alert("x")</script>'
    image.external_id = evil
    image.credit = evil
    image.metadata = {"note": evil}
    image.save()
    Caption.objects.create(image=image, text=evil, origin=Caption.Origin.ALT_TEXT, source=evil)
    html = alice_client.get(reverse("image-detail", args=[image.pk])).content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


# --- Imports ------------------------------------------------------------------------------------


def test_the_import_page_preselects_the_collection_from_the_query(alice_client, collection):
    html = alice_client.get(reverse("import-create"), {"collection": collection.pk}).content.decode()
    assert f'<option value="{collection.pk}" selected>' in html
    assert 'enctype="multipart/form-data"' in html and "csrfmiddlewaretoken" in html
    assert 'value="captions.csv"' in html and 'name="download_images"' in html and "checked" in html


def test_uploading_a_zip_of_images_lands_them_and_the_job_page_shows_the_report(
    alice_client, eager_celery, django_capture_on_commit_callbacks
):
    archive = zip_of_pngs(3, extra={"notes.png": b"this is not a png"})
    upload = SimpleUploadedFile("photos.zip", archive, content_type="application/zip")
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("import-create"), {
            "new_collection": "Holiday", "kind": "images", "file": upload, "sidecar": "captions.csv",
        })
    job = ImportJob.objects.get()
    assert response.status_code == 302 and response.url == job.get_absolute_url()
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE
    assert job.collection.name == "Holiday" and job.options == {"sidecar": "captions.csv"}
    assert job.collection.images.count() == 3
    assert Caption.objects.filter(image__collection=job.collection).count() == 3
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert '<progress value="100" max="100"' in html and "100%" in html and "Done" in html
    assert "notes.png" in html and ImportIssue.objects.get(job=job).code in html
    assert f'href="{job.collection.get_absolute_url()}"' in html


def test_the_import_options_follow_the_kind(alice_client, collection, eager_celery, django_capture_on_commit_callbacks):
    upload = SimpleUploadedFile("pairs.tsv", b"A red bus\thttps://example.org/bus.jpg\n")
    with django_capture_on_commit_callbacks(execute=False):
        response = alice_client.post(reverse("import-create"), {
            "collection": collection.pk, "kind": "tsv", "file": upload, "sidecar": "captions.csv",
            "origin": "museum",
        })
    assert response.status_code == 302
    assert ImportJob.objects.get().options == {"download": False, "origin": "museum"}


def test_an_ingest_error_is_shown_in_the_form_and_no_collection_is_left_behind(alice_client):
    upload = SimpleUploadedFile("photos.txt", b"hello")
    response = alice_client.post(reverse("import-create"), {"new_collection": "Orphan", "kind": "images", "file": upload})
    assert response.status_code == 400
    assert "does not look like a Folder or zip of images file" in response.content.decode()
    assert not Collection.objects.filter(name="Orphan").exists()


def test_an_import_needs_a_collection_existing_or_new(alice_client):
    upload = SimpleUploadedFile("photos.zip", zip_of_pngs(1))
    response = alice_client.post(reverse("import-create"), {"kind": "images", "file": upload})
    assert response.status_code == 400
    assert "Name the new collection" in response.content.decode()
    assert not ImportJob.objects.exists()


def test_the_import_report_shows_a_hundred_issues_a_page(alice_client, job):
    ImportIssue.objects.bulk_create(
        ImportIssue(job=job, line=i, item=f"row-{i}", code="missing_column", message="no URL") for i in range(1, 102)
    )
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert html.count("<td><code>missing_column</code>") == 100 and "Page 1 of 2" in html
    second = alice_client.get(job.get_absolute_url(), {"page": 2}, headers={"HX-Request": "true"}).content.decode()
    assert "row-101" in second and "<html" not in second


def test_a_running_job_page_polls_its_progress_fragment_every_second(alice_client, job):
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert f'hx-get="{reverse("import-progress", args=[job.pk])}" hx-trigger="every 1s"' in html
    assert '<progress value="25" max="100"' in html and "25%" in html


def test_the_progress_fragment_is_returned_to_htmx_and_polls_while_the_job_runs(alice_client, job):
    response = alice_client.get(reverse("import-progress", args=[job.pk]), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'id="import-progress"' in html
    assert 'hx-trigger="every 1s"' in html and '<progress value="25" max="100"' in html
    assert "Rows read" in html and "of 200" in html
    assert "HX-Trigger" not in response.headers


def test_the_progress_fragment_stops_polling_once_the_job_has_finished(alice_client, job):
    job.status = ImportJob.Status.DONE
    job.rows_read = 200
    job.save()
    response = alice_client.get(reverse("import-progress", args=[job.pk]), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "hx-trigger" not in html and "hx-get" not in html
    assert '<progress value="100" max="100"' in html and "100%" in html
    assert response.headers["HX-Trigger"] == "import-finished"
    assert job.collection.get_absolute_url() in html


def test_the_import_list_shows_recent_imports(alice_client, job):
    html = alice_client.get(reverse("import-list")).content.decode()
    assert "pairs.tsv" in html and job.get_absolute_url() in html and "Street photos" in html
