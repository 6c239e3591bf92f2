"""The JSON API: roles, whitelisted filters, pagination, token auth, imports, the OpenAPI docs."""
import io
import zipfile

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from curation.models import Caption, Collection, Image, ImportJob

from .helpers import png_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def data():
    collection = Collection.objects.create(name="api")
    image = Image.objects.create(collection=collection, external_id="castle", status="missing")
    raw = Caption.objects.create(image=image, text="Laugharne Castle, Wales, 12 July 2010", origin="alt_text")
    Caption.objects.create(image=image, text="castle", origin="transformed", parent=raw)
    return collection, image, raw


def test_anonymous_callers_and_annotators_are_refused(api, bob, data):
    assert api.get("/api/collections/").status_code in (401, 403)
    api.force_authenticate(bob)
    for url in ("/api/collections/", "/api/images/", "/api/captions/", "/api/imports/"):
        assert api.get(url).status_code == 403, url


def test_curators_list_captions_with_whitelisted_filters_and_lineage(api, alice, data):
    collection, image, raw = data
    api.force_authenticate(alice)
    body = api.get("/api/captions/", {"origin": "transformed", "collection": collection.pk}).json()
    assert body["count"] == 1
    assert body["results"][0]["lineage"][-1] == raw.pk
    assert api.get("/api/captions/", {"q": "wales"}).json()["count"] == 1


def test_filters_outside_the_whitelist_are_refused_not_passed_to_the_orm(api, alice, data):
    api.force_authenticate(alice)
    response = api.get("/api/images/", {"collection__created_by__password__startswith": "pbkdf2"})
    assert response.status_code == 400
    assert "unknown filter" in response.json()["detail"]
    assert api.get("/api/images/", {"ordering": "collection__created_by__password"}).status_code == 400
    assert api.get("/api/images/", {"min_width": "wide"}).status_code == 400


def test_results_are_paginated(api, alice, data):
    collection = data[0]
    Image.objects.bulk_create([Image(collection=collection, external_id=f"x{i}", status="missing") for i in range(60)])
    api.force_authenticate(alice)
    first = api.get("/api/images/").json()
    assert first["count"] == 61 and len(first["results"]) == 50 and first["next"]


def test_a_token_from_username_and_password_authenticates(api, alice):
    response = api.post("/api/auth/token/", {"username": "alice", "password": "alice-pw-123"})
    token = response.json()["token"]
    assert Token.objects.get(user=alice).key == token
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/collections/").status_code == 200


def test_curators_create_collections_and_start_imports_through_the_api(api, alice, eager_celery,
                                                                       django_capture_on_commit_callbacks):
    api.force_authenticate(alice)
    created = api.post("/api/collections/", {"name": "from the API", "language": "en"}, format="json")
    assert created.status_code == 201
    assert api.post("/api/collections/", {"name": "from the API"}, format="json").status_code == 400
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a.png", png_bytes())
        zf.writestr("b.jpg", b"not an image")
    buf.seek(0)
    buf.name = "batch.zip"
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/imports/", {"collection": created.json()["id"], "kind": "images", "file": buf},
                            format="multipart")
    assert response.status_code == 202, response.content
    job = api.get(f"/api/imports/{response.json()['id']}/").json()
    assert (job["status"], job["percent"], job["rows_imported"], job["rows_skipped"]) == ("done", 100, 1, 1)
    report = api.get(f"/api/imports/{job['id']}/report/").json()
    assert report["results"][0]["item"] == "b.jpg" and report["results"][0]["code"] == "not_an_image"


def test_an_import_of_the_wrong_file_type_or_bad_options_is_refused_with_a_reason(api, alice, data):
    api.force_authenticate(alice)
    page = io.BytesIO(b"<html></html>")
    page.name = "page.html"
    response = api.post("/api/imports/", {"collection": data[0].pk, "kind": "tsv", "file": page}, format="multipart")
    assert response.status_code == 400 and "page.html" in response.json()["file"]
    tsv = io.BytesIO(b"a\thttp://x.org/a.jpg\n")
    tsv.name = "a.tsv"
    response = api.post("/api/imports/", {"collection": data[0].pk, "kind": "tsv", "file": tsv,
                                          "options": '{"images_dir": "/etc"}'}, format="multipart")
    assert response.status_code == 400 and "images_dir" in str(response.json())
    assert not ImportJob.objects.exists()


def test_the_openapi_schema_and_docs_page_are_served_without_a_cdn(client, alice):
    client.force_login(alice)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/imports/" in schema.content
    docs = client.get("/api/docs/")
    html = docs.content.decode()
    assert docs.status_code == 200 and "swagger-ui" in html
    assert "cdn." not in html and "unpkg" not in html and "jsdelivr" not in html


def test_an_anonymous_visitor_of_the_api_docs_is_sent_to_the_login_page(client):
    for path in ("/api/docs/", "/api/redoc/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith(f"/accounts/login/?next={path}")


def test_redoc_is_served_offline_from_the_sidecar_without_google_fonts(client, alice):
    client.force_login(alice)
    response = client.get("/api/redoc/")
    html = response.content.decode()
    assert response.status_code == 200 and "/static/drf_spectacular_sidecar/redoc/" in html
    assert "googleapis" not in html and "gstatic" not in html and "cdn." not in html
    assert "<script>" not in html  # an inline script would need the nonce


def test_a_curator_finds_the_api_docs_in_the_navigation(client, alice):
    client.force_login(alice)
    assert 'href="/api/docs/">API docs</a>' in client.get("/").content.decode()
