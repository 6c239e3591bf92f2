"""`manage.py demo`: users for each role and the scikit-image collection, through the real ingest."""
import csv
import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command

from captionlab import roles
from curation import demo
from curation.ingest import runner
from curation.models import Caption, Collection, Image, ImportJob


@pytest.fixture
def run_demo(django_capture_on_commit_callbacks):
    """`manage.py demo` in the test's transaction: the import task (queued on commit) runs when the
    command returns, as it runs at once under the command's autocommit."""

    def run(*args) -> str:
        out = io.StringIO()
        with django_capture_on_commit_callbacks(execute=True):
            call_command("demo", *args, stdout=out)
        return out.getvalue()

    return run


def printed_passwords(output: str) -> dict[str, str]:
    return dict(re.findall(r"^\s+(?:annotator|curator|admin)\s+(demo-\S+)\s+(\S+)$", output, re.M))


@pytest.fixture
def present():
    images, _missing = demo.available_images()
    if not images:
        pytest.skip("scikit-image ships none of the demo photographs")
    return images


def test_the_demo_loads_users_and_photographs_and_a_rerun_duplicates_nothing(db, eager_celery, run_demo, present):
    output = run_demo()

    passwords = printed_passwords(output)
    assert set(passwords) == {"demo-annotator", "demo-annotator-2", "demo-curator", "demo-admin"}
    assert "/accounts/login/" in output
    for username, password in passwords.items():
        user = authenticate(username=username, password=password)
        assert user is not None, username
    admin = authenticate(username="demo-admin", password=passwords["demo-admin"])
    assert admin.is_staff and admin.is_superuser and roles.has_role(admin, roles.ADMIN)
    curator = authenticate(username="demo-curator", password=passwords["demo-curator"])
    assert roles.has_role(curator, roles.CURATOR) and not curator.is_staff
    annotator = authenticate(username="demo-annotator", password=passwords["demo-annotator"])
    assert roles.user_roles(annotator) == {roles.ANNOTATOR}

    collection = Collection.objects.get(name=demo.COLLECTION_NAME)
    assert collection.images.filter(status=Image.Status.READY).count() == len(present)
    captions = Caption.objects.filter(image__collection=collection)
    assert captions.count() == sum(len(img.captions) for img in present)
    assert set(captions.values_list("origin", flat=True)) == {Caption.Origin.ALT_TEXT}
    assert set(captions.values_list("source", flat=True)) == {demo.SOURCE_NAME}
    job = collection.imports.get()
    assert job.status == ImportJob.Status.DONE and job.rows_skipped == 0
    by_name = {img.name: img for img in present}
    for image in collection.images.all():
        expected = by_name[image.metadata["file_name"]]
        assert image.license == expected.license and image.credit == expected.credit
        assert image.sha256 and image.width and image.height and image.thumbnail
        # Photographs arrive as JPEG (the conceptual-captions format filter keeps them), the scans as PNG.
        jpeg = expected.jpeg or expected.file.endswith(".jpg")
        assert image.content_type == ("image/jpeg" if jpeg else "image/png"), expected.file

    # Again: nothing new, no second import, and new passwords.
    second = run_demo()
    assert "already complete" in second
    assert Collection.objects.filter(name=demo.COLLECTION_NAME).count() == 1
    assert collection.images.count() == len(present)
    assert Caption.objects.filter(image__collection=collection).count() == captions.count()
    assert collection.imports.count() == 1
    again = printed_passwords(second)
    assert all(again[u] != passwords[u] for u in passwords)
    assert authenticate(username="demo-curator", password=passwords["demo-curator"]) is None

    # A forced re-import runs the ingest again and adds nothing (sha256 and caption dedup).
    run_demo("--reimport")
    assert collection.imports.count() == 2
    assert collection.images.count() == len(present)
    assert Caption.objects.filter(image__collection=collection).count() == captions.count()


def test_with_workers_the_demo_uploads_a_zip_that_a_worker_can_read(
        db, django_capture_on_commit_callbacks, present):
    from config.celery import app

    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        with django_capture_on_commit_callbacks(execute=False):  # nothing is sent to a broker
            result = demo.load(wait=False)
    finally:
        app.conf.task_always_eager = saved
    job = result.job
    assert job.status == ImportJob.Status.QUEUED
    assert job.upload.name.endswith(".zip") and not job.source_path
    job = runner.import_run(job.pk)  # what the worker's task does
    assert job.status == ImportJob.Status.DONE
    assert demo.wait_for(job, timeout=5, out=io.StringIO()).status == ImportJob.Status.DONE
    assert result.collection.images.count() == len(present)


def test_the_sidecar_names_each_photograph_with_its_licence(present):
    rows = list(csv.DictReader(io.StringIO(demo.sidecar_csv(present))))
    assert set(rows[0]) == {"file", "caption", "license", "credit"}
    assert {row["file"] for row in rows} == {img.name for img in present}
    assert all(2 <= len(img.captions) <= 3 for img in demo.IMAGES)
    astronaut = next(row for row in rows if row["file"] == "astronaut.jpg")
    assert "NASA" in astronaut["credit"] and "Public domain" in astronaut["license"]


def test_the_demo_refuses_the_production_profile(db, settings):
    settings.PRODUCTION = True
    with pytest.raises(CommandError, match="production"):
        call_command("demo", stdout=io.StringIO())



def test_manage_py_demo_on_the_embedded_default_end_to_end(tmp_path, present):
    """What `make run` does before serving: migrate, then the demo twice, in fresh processes on
    SQLite with eager Celery (no DATABASE_URL, no REDIS_URL), reading a temporary folder."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "CAPTIONLAB_VAR_DIR": str(tmp_path / "var")}

    def manage(*args):
        proc = subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        return proc.stdout

    manage("migrate", "--noinput", "-v", "0")
    first = manage("demo")
    assert "sqlite3, Celery eager mode" in first
    assert f"{len(present)} images imported, 0 already there, 0 skipped" in first
    assert len(printed_passwords(first)) == 4
    second = manage("demo", "--base-url", "http://127.0.0.1:8123")
    assert "already complete" in second and "http://127.0.0.1:8123/accounts/login/" in second
    assert (tmp_path / "var" / "db.sqlite3").exists() and (tmp_path / "var" / "media" / "images").is_dir()


def test_without_a_running_worker_the_demo_says_so_at_once(db, django_capture_on_commit_callbacks, present):
    """REDIS_URL set and no worker: a clear message within seconds, not a 600 s wait; --no-wait queues."""
    import os
    import time

    from config.celery import app

    from .conftest import REQUIRE_SERVICES

    if not os.environ.get("REDIS_URL"):
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but REDIS_URL is not set")
        pytest.skip("needs a broker (REDIS_URL): without one the demo runs the import in this process")
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        with django_capture_on_commit_callbacks(execute=False):  # nothing reaches the broker
            started = time.monotonic()
            with pytest.raises(RuntimeError, match="no Celery worker consumes the 'default' queue.*--no-wait"):
                demo.load(wait=True, timeout=600)
            assert time.monotonic() - started < 20
            result = demo.load(wait=False)  # --no-wait: queued, no question asked
    finally:
        app.conf.task_always_eager = saved
    assert result.job.status == ImportJob.Status.QUEUED


def test_a_worker_on_the_default_queue_is_found(redis_worker):
    assert demo.workers_consuming("default")
    assert not demo.workers_consuming("no-such-queue")
