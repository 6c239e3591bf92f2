"""Re-export and verify, and deleting an export, from the release page, the API and the command.

Alice (curator) verifies a done export: its files are written again and every sha256 matches the
recorded one and the stored one. When a stored file is damaged, or the release's rows change under
it, the verification names the files that differ. Deleting an export removes its files from
storage. Bob (annotator) can do neither. Exports with and without images are distinct exports."""
from __future__ import annotations

import io

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.authtoken.models import Token

from releases import ReleaseError, publish, services
from releases.models import ReleaseExport, ReleaseItem
from releases.verify import run_verify

from .test_release_services import export_now, frozen_release, make_collection


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def release(db):
    return frozen_release(make_collection("Harbour photos", n_images=5))


def damage(export, name: str) -> None:
    stored = publish.storage_name(export, name)
    default_storage.delete(stored)
    default_storage.save(stored, ContentFile(b"not what was published"))


def test_a_verified_export_matches_every_sha256_and_a_damaged_file_is_named(release):
    export = export_now(release, "coco", {"image_archive": "zip"})
    services.export_verify(export, enqueue=False)
    export = run_verify(export.pk)
    v = export.verification
    assert v["status"] == "done" and v["ok"] is True and v["matched"] == len(export.files) >= 3
    assert [f["name"] for f in v["files"]] == [f["name"] for f in export.files]
    assert all(f["recorded"] == f["rewritten"] == f["stored"] for f in v["files"])
    shard = next(f["name"] for f in export.files if "-images-" in f["name"])
    damage(export, shard)
    services.export_verify(export, enqueue=False)
    v = run_verify(export.pk).verification
    assert v["ok"] is False and v["matched"] == len(export.files) - 1
    [bad] = [f for f in v["files"] if not f["match"]]
    assert bad["name"] == shard and bad["recorded"] == bad["rewritten"] != bad["stored"]


def test_a_release_whose_rows_changed_no_longer_verifies(release):
    export = export_now(release, "jsonl", {"images": "none"})
    ReleaseItem.objects.filter(release=release, position=0).update(text="a tampered caption")
    services.export_verify(export, enqueue=False)
    v = run_verify(export.pk).verification
    jsonl = next(f for f in v["files"] if f["name"].endswith(".jsonl"))
    assert v["ok"] is False and jsonl["rewritten"] != jsonl["recorded"] == jsonl["stored"]


def test_only_a_done_export_is_verified_and_one_verification_at_a_time(release):
    export = ReleaseExport.objects.create(release=release, format="csv", options={"images": "none"})
    with pytest.raises(ReleaseError, match="done export"):
        services.export_verify(export, enqueue=False)
    done = export_now(release, "csv", {"images": "none"})
    services.export_verify(done, enqueue=False)
    with pytest.raises(ReleaseError, match="verified already"):
        services.export_verify(done, enqueue=False)


def test_deleting_an_export_removes_its_files(release):
    export = export_now(release, "parquet")
    names = publish.stored_files(export)
    assert len(names) == len(export.files) == 3
    assert services.export_delete(export) == 3
    assert not ReleaseExport.objects.filter(pk=export.pk).exists()
    assert publish.stored_files(export) == [] and not any(default_storage.exists(n) for n in names)
    running = ReleaseExport.objects.create(release=release, format="csv", options={}, status="running")
    with pytest.raises(ReleaseError, match="being written"):
        services.export_delete(running)


def test_an_export_deleted_before_its_task_ran_is_left_deleted(release):
    export = services.export_create(release, "csv", {}, None, enqueue=False)
    services.export_delete(export)
    assert publish.run_export(export.pk) is None and run_verify(export.pk) is None


def test_images_and_no_images_are_two_exports_and_the_defaults_are_spelt_out(release):
    with_images = services.export_create(release, "jsonl", {}, None, enqueue=False)
    assert with_images.options == {"images": "include", "missing_images": "skip", "image_archive": "tar"}
    same = services.export_create(release, "jsonl", {"images": "include", "image_archive": "tar"}, None,
                                  enqueue=False)
    without = services.export_create(release, "jsonl", {"images": "none"}, None, enqueue=False)
    assert same.pk == with_images.pk and without.pk != with_images.pk and without.options == {"images": "none"}


# --- The page --------------------------------------------------------------------------------------------


def test_alice_verifies_and_deletes_from_the_release_page(alice_client, release, eager_celery,
                                                          django_capture_on_commit_callbacks):
    export = export_now(release, "karpathy")
    page = alice_client.get(release.get_absolute_url()).content.decode()
    assert "Re-export and verify" in page and 'data-images="include"' in page
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("release-export-verify", args=[release.pk, export.pk]),
                                     HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    export.refresh_from_db()
    assert export.verification["ok"] is True
    fragment = alice_client.get(reverse("release-exports", args=[release.pk])).content.decode()
    assert 'data-verify="ok"' in fragment and f"all {len(export.files)} sha256 match" in fragment
    damage(export, export.files[0]["name"])
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post(reverse("release-export-verify", args=[release.pk, export.pk]))
    fragment = alice_client.get(reverse("release-exports", args=[release.pk])).content.decode()
    assert 'data-verify="mismatch"' in fragment and export.files[0]["name"] in fragment
    names = publish.stored_files(export)
    response = alice_client.post(reverse("release-export-delete", args=[release.pk, export.pk]))
    assert response.status_code == 302
    assert "deleted" in alice_client.get(response["Location"]).content.decode()
    assert not ReleaseExport.objects.filter(pk=export.pk).exists()
    assert not any(default_storage.exists(n) for n in names)
    # A second delete of the same export: not found, not a 500.
    assert alice_client.post(reverse("release-export-delete", args=[release.pk, export.pk])).status_code == 404


def test_alice_exports_without_images_from_the_page(alice_client, release, eager_celery,
                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("release-exports", args=[release.pk]),
                                     {"format": "csv", "images": "none", "image_archive": "zip", "shard_mb": "3"},
                                     HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    export = ReleaseExport.objects.get(release=release, format="csv")
    assert export.options == {"images": "none"} and len(export.files) == 2
    assert "without images" in response.content.decode()
    response = alice_client.post(reverse("release-exports", args=[release.pk]),
                                 {"format": "coco", "images": "some"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and "images must be one of" in response.content.decode()


def test_bob_can_neither_verify_nor_delete(bob_client, release):
    export = export_now(release, "csv")
    for name in ("release-export-verify", "release-export-delete"):
        assert bob_client.post(reverse(name, args=[release.pk, export.pk])).status_code == 403
    assert ReleaseExport.objects.filter(pk=export.pk).exists() and publish.stored_files(export)


# --- The API ---------------------------------------------------------------------------------------------


def test_the_api_verifies_and_deletes_an_export(client, carol, release, eager_celery,
                                                django_capture_on_commit_callbacks):
    auth = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=carol).key}"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/releases/{release.pk}/exports/",
                               {"format": "webdataset", "options": {"samples_per_shard": 2}},
                               content_type="application/json", **auth)
    export_id = response.json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/releases/{release.pk}/exports/{export_id}/verify/", **auth)
    assert response.status_code == 202
    data = client.get(f"/api/releases/{release.pk}/exports/{export_id}/", **auth).json()
    assert data["verification"]["ok"] is True and data["verification"]["matched"] == len(data["files"]) == 4
    assert client.post(f"/api/releases/{release.pk}/exports/999999/verify/", **auth).status_code == 404
    export = ReleaseExport.objects.get(pk=export_id)
    names = publish.stored_files(export)
    assert client.delete(f"/api/releases/{release.pk}/exports/{export_id}/", **auth).status_code == 204
    assert not any(default_storage.exists(n) for n in names)
    assert client.get(f"/api/releases/{release.pk}/exports/{export_id}/", **auth).status_code == 404
    bad = client.post(f"/api/releases/{release.pk}/exports/", {"format": "csv", "options": {"images": "maybe"}},
                      content_type="application/json", **auth)
    assert bad.status_code == 400 and "images" in bad.json()


# --- The command -----------------------------------------------------------------------------------------


def test_the_command_exports_with_zip_images_verifies_and_deletes(release, tmp_path):
    out = io.StringIO()
    call_command("release", "export", str(release.pk), "--format", "coco", "--image-archive", "zip",
                 "--missing-images", "fail", "--out", str(tmp_path / "out"), "--verify", stdout=out)
    export = ReleaseExport.objects.get(release=release, format="coco")
    assert export.options["image_archive"] == "zip" and export.options["missing_images"] == "fail"
    assert "verified: all" in out.getvalue() and export.verification["ok"]
    assert (tmp_path / "out" / f"release-{release.pk}-images-000000.zip").exists()
    damage(export, f"release-{release.pk}-export.json")
    with pytest.raises(CommandError, match="file\\(s\\) match"):
        call_command("release", "verify", str(export.pk), stdout=(out := io.StringIO()))
    assert "MISMATCH" in out.getvalue()
    out = io.StringIO()
    call_command("release", "show", str(release.pk), stdout=out)
    assert "images include" in out.getvalue() and "verification: done" in out.getvalue()
    out = io.StringIO()
    call_command("release", "delete-export", str(export.pk), stdout=out)
    assert f"with its {len(export.files)} file(s)" in out.getvalue()
    assert publish.stored_files(export) == []
    with pytest.raises(CommandError, match="no export"):
        call_command("release", "verify", str(export.pk), stdout=io.StringIO())


def test_the_command_reports_missing_images_as_a_count(release):
    victim = ReleaseItem.objects.filter(release=release).order_by("position").first()
    default_storage.delete(victim.image_file)
    out = io.StringIO()
    call_command("release", "export", str(release.pk), "--format", "csv", "--missing-images", "skip", stdout=out)
    assert "1 image file(s) missing from storage: 2 caption(s) left out" in out.getvalue()
    with pytest.raises(CommandError, match=victim.image_file):
        call_command("release", "export", str(release.pk), "--format", "csv", "--missing-images", "fail",
                     stdout=io.StringIO())
