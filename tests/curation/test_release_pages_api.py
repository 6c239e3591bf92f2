"""Release pages and API: roles (annotators 403, anonymous to the login page), the create form's
errors next to their fields with the input kept, the detail page (progress, counts chart, card,
items with provenance, exports), exports and permission-checked downloads (a stream on a local
disk, a signed redirect on S3), and the API with its whitelisted filters."""
import hashlib
import re

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse
from rest_framework.authtoken.models import Token

from releases import publish
from releases.models import Release, ReleaseExport

from .test_release_services import config_for, export_now, frozen_release, make_collection, make_quality_campaign


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def body(response) -> str:
    return b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()


def download_bytes(response) -> bytes:
    return b"".join(response.streaming_content)


# --- Permissions ----------------------------------------------------------------------------------------


def test_annotators_and_people_without_a_role_get_403_and_anonymous_the_login_page(client, bob, dave, db):
    release = frozen_release(make_collection(n_images=2))
    export = export_now(release, "jsonl")
    urls = [reverse("release-list"), reverse("release-create"), release.get_absolute_url(),
            reverse("release-progress", args=[release.pk]), reverse("release-exports", args=[release.pk]),
            reverse("release-download", args=[release.pk, export.pk])]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
    for user in (bob, dave):
        client.force_login(user)
        for url in urls:
            assert client.get(url).status_code == 403, (user.username, url)
        assert client.post(reverse("release-exports", args=[release.pk]), {"format": "csv"}).status_code == 403
        assert client.post(reverse("release-freeze", args=[release.pk])).status_code == 403
        for url in ("/api/releases/", f"/api/releases/{release.pk}/", f"/api/releases/{release.pk}/items/",
                    f"/api/releases/{release.pk}/exports/",
                    f"/api/releases/{release.pk}/exports/{export.pk}/download/"):
            assert client.get(url).status_code == 403, url
    client.logout()
    assert client.get("/api/releases/").status_code in (401, 403)
    assert ReleaseExport.objects.count() == 1


# --- The create form -------------------------------------------------------------------------------------


def test_the_create_form_shows_errors_next_to_fields_and_keeps_the_input(alice_client, db):
    collection = make_collection(n_images=2)
    response = alice_client.post(reverse("release-create"), {
        "name": "<b>my release</b>", "split_train": "0.8", "split_val": "0.1", "split_test": "0.1", "seed": "5",
        "dedup": "sha256", "missing_image": "skip", "vote_rule_1": "good_2plus"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "&lt;b&gt;my release&lt;/b&gt;" in page and "<b>my release</b>" not in page  # kept, escaped
    assert re.search(r'id="id_collections".*?field-error">This field is required', page, re.S)
    assert "Choose the campaign whose votes the rule reads." in page
    assert 'value="5"' in page
    # Shares that do not add up: the library's message, shown at the split fields.
    response = alice_client.post(reverse("release-create"), {
        "name": "bad splits", "collections": [collection.pk], "split_train": "0.8", "split_val": "0.5",
        "split_test": "0.1", "seed": "1", "dedup": "sha256", "missing_image": "skip"})
    assert response.status_code == 400
    page = response.content.decode()
    assert re.search(r'id="id_split_train".*?field-error"', page, re.S)
    assert Release.objects.count() == 0


def test_creating_and_freezing_from_the_form_shows_counts_card_items_and_exports(
        alice_client, db, eager_celery, django_capture_on_commit_callbacks):
    collection = make_collection(n_images=8)
    campaign = make_quality_campaign(collection)
    form = {"name": "birds v1", "collections": [collection.pk], "split_train": "0.5", "split_val": "0.25",
            "split_test": "0.25", "seed": "2", "dedup": "sha256", "missing_image": "skip",
            "test_human_verified": "on", "freeze": "on", "vote_campaign_1": campaign.pk,
            "vote_rule_1": "good_1plus", "max_captions_per_image": "2"}
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("release-create"), form)
    release = Release.objects.get(name="birds v1")
    assert response.status_code == 302 and response["Location"] == release.get_absolute_url()
    release.refresh_from_db()
    assert release.status == Release.Status.FROZEN, release.error
    assert release.config["vote_rules"][0]["campaign"] == campaign.pk
    page = alice_client.get(release.get_absolute_url()).content.decode()
    assert 'class="chart counts-chart"' in page
    for split in ("train", "val", "test"):
        assert f'data-split="{split}"' in page
    assert release.content_hash in page
    assert 'id="release-card"' in page and "<h1>" in page.split('id="release-card"')[1]
    assert page.count('class="provenance"') == min(release.items_total, 50)
    assert 'hx-trigger="every 1s"' not in page.split('id="release-progress"')[1].split("</section>")[0]
    # The progress fragment of a frozen release tells htmx to reload the page.
    response = alice_client.get(reverse("release-progress", args=[release.pk]), HTTP_HX_REQUEST="true")
    assert response["HX-Refresh"] == "true"
    # Export from the page (htmx), then download.
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("release-exports", args=[release.pk]), {"format": "jsonl"},
                                     HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    export = ReleaseExport.objects.get(release=release, format="jsonl")
    assert export.status == ReleaseExport.Status.DONE
    fragment = alice_client.get(reverse("release-exports", args=[release.pk])).content.decode()
    assert [f["name"] for f in export.files] == [f"release-{release.pk}-export.json",
                                                 f"release-{release.pk}-images-000000.tar", f"release-{release.pk}.jsonl"]
    for entry in export.files:
        link = reverse("release-download", args=[release.pk, export.pk]) + "?file=" + entry["name"]
        assert f'href="{link}"' in fragment and "every 1s" not in fragment
        response = alice_client.get(link)
        assert response.status_code == 200 and response["Content-Disposition"].startswith("attachment;")
        assert hashlib.sha256(download_bytes(response)).hexdigest() == entry["sha256"]


def test_the_items_page_paginates_with_htmx(alice_client, db):
    release = frozen_release(make_collection(n_images=30))  # 60 items: two pages of 50
    response = alice_client.get(release.get_absolute_url() + "?page=2", HTTP_HX_REQUEST="true")
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<section class="card flush" id="release-items"')
    assert fragment.count("data-position=") == 10 and "Page 2 of 2" in fragment


def test_export_errors_and_a_webdataset_shard_download(alice_client, db, eager_celery,
                                                      django_capture_on_commit_callbacks):
    release = frozen_release(make_collection(n_images=3))
    response = alice_client.post(reverse("release-exports", args=[release.pk]),
                                 {"format": "webdataset", "samples_per_shard": "-4"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and "samples per shard" in response.content.decode()
    assert 'value="-4"' in response.content.decode()
    response = alice_client.post(reverse("release-exports", args=[release.pk]), {"format": "<zip>"},
                                 HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and "Unknown format &#x27;&lt;zip&gt;&#x27;" in response.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post(reverse("release-exports", args=[release.pk]),
                          {"format": "webdataset", "samples_per_shard": "2", "shard_mb": "5"})
    export = ReleaseExport.objects.get(release=release, format="webdataset")
    assert export.status == "done" and len(export.files) == 3  # 3 images, 2 per shard, and the manifest
    assert export.options == {"images": "include", "missing_images": "skip", "samples_per_shard": 2,
                              "shard_size": 5 * 1024 * 1024}
    url = reverse("release-download", args=[release.pk, export.pk])
    assert alice_client.get(url).status_code == 404  # several files: name one
    assert alice_client.get(url + "?file=../../etc/passwd").status_code == 404
    shard = export.files[1]
    response = alice_client.get(url + "?file=" + shard["name"])
    assert hashlib.sha256(download_bytes(response)).hexdigest() == shard["sha256"]
    queued = Release.objects.create(name="not frozen", config={})
    response = alice_client.post(reverse("release-exports", args=[queued.pk]), {"format": "csv"})
    assert response.status_code == 302
    assert "Only a frozen release" in alice_client.get(response["Location"]).content.decode()


def test_downloads_on_s3_redirect_to_a_signed_url(alice_client, db, monkeypatch):
    release = frozen_release(make_collection(n_images=2))
    export = export_now(release, "csv", {"images": "none"})
    storage = default_storage._wrapped if hasattr(default_storage, "_wrapped") else default_storage
    asked = {}

    def no_path(name):
        raise NotImplementedError("remote storage")

    def signed(name, parameters=None, **kwargs):
        asked.update(name=name, parameters=parameters)
        return f"https://bucket.example/{name}?X-Amz-Signature=abc"

    monkeypatch.setattr(storage, "path", no_path)
    monkeypatch.setattr(storage, "url", signed)
    response = alice_client.get(reverse("release-download", args=[release.pk, export.pk]))
    assert response.status_code == 302 and "X-Amz-Signature" in response["Location"]
    assert asked["name"] == publish.storage_name(export, f"release-{release.pk}.csv")
    assert "attachment" in asked["parameters"]["ResponseContentDisposition"]
    response = alice_client.get(f"/api/releases/{release.pk}/exports/{export.pk}/download/")
    assert response.status_code == 302 and "X-Amz-Signature" in response["Location"]


# --- The API --------------------------------------------------------------------------------------------


def test_the_api_creates_freezes_lists_items_and_exports(client, carol, db, eager_celery,
                                                        django_capture_on_commit_callbacks):
    token = Token.objects.create(user=carol)
    auth = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    collection = make_collection(n_images=4)
    response = client.post("/api/releases/", {"name": "api", "config": {**config_for(collection), "dedup": "x"}},
                           content_type="application/json", **auth)
    assert response.status_code == 400 and "dedup" in response.json()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/releases/", {"name": "api", "config": config_for(collection)},
                               content_type="application/json", **auth)
    assert response.status_code == 201
    release_id = response.json()["id"]
    assert response.json()["status"] == "queued"
    response = client.post(f"/api/releases/{release_id}/exports/", {"format": "jsonl"},
                           content_type="application/json", **auth)
    assert response.status_code == 400 and "frozen" in str(response.json())
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/releases/{release_id}/freeze/", **auth)
    assert response.status_code == 202
    data = client.get(f"/api/releases/{release_id}/", **auth).json()
    assert data["status"] == "frozen" and data["items_total"] == 8 and data["card"]
    response = client.post(f"/api/releases/{release_id}/freeze/", **auth)
    assert response.status_code == 400  # frozen: never again
    items = client.get(f"/api/releases/{release_id}/items/?page_size=3", **auth).json()
    assert items["count"] == 8 and items["results"][0]["position"] == 0 and "provenance" in items["results"][0]
    test_items = client.get(f"/api/releases/{release_id}/items/?split=test", **auth).json()
    assert all(row["split"] == "test" for row in test_items["results"])
    assert client.get(f"/api/releases/{release_id}/items/?text=bird", **auth).status_code == 400
    assert client.get("/api/releases/?password=x", **auth).status_code == 400
    assert client.get("/api/releases/?status=frozen", **auth).json()["count"] == 1
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/releases/{release_id}/exports/",
                               {"format": "parquet"}, content_type="application/json", **auth)
    assert response.status_code == 202
    export = response.json()
    response = client.post(f"/api/releases/{release_id}/exports/", {"format": "parquet", "options": {}},
                           content_type="application/json", **auth)
    assert response.status_code == 200 and response.json()["id"] == export["id"]  # reused
    listing = client.get(f"/api/releases/{release_id}/exports/", **auth).json()
    assert [row["status"] for row in listing] == ["done"]
    assert client.get(listing[0]["download"], **auth).status_code == 404  # parquet, images shard, manifest
    assert [d["name"] for d in listing[0]["downloads"]] == [f["name"] for f in listing[0]["files"]]
    for link, entry in zip(listing[0]["downloads"], listing[0]["files"]):
        response = client.get(link["url"], **auth)
        assert response.status_code == 200
        assert hashlib.sha256(download_bytes(response)).hexdigest() == entry["sha256"]
    assert client.get(f"/api/releases/{release_id}/exports/999999/download/", **auth).status_code == 404
    bad = client.post(f"/api/releases/{release_id}/exports/", {"format": "zip"}, content_type="application/json",
                      **auth)
    assert bad.status_code == 400 and "format" in bad.json()


def test_an_empty_selection_through_the_api_gives_a_failed_release_with_the_message(
        client, alice, db, eager_celery, django_capture_on_commit_callbacks):
    client.force_login(alice)
    from curation.models import Collection

    empty = Collection.objects.create(name="nothing here")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/releases/", {"name": "empty", "config": config_for(empty), "freeze": True},
                               content_type="application/json")
    assert response.status_code == 201
    data = client.get(f"/api/releases/{response.json()['id']}/").json()
    assert data["status"] == "failed" and data["error"]
    page = client.get(reverse("release-detail", args=[data["id"]])).content.decode()
    assert "Freeze again" in page and 'data-role="error"' in page
