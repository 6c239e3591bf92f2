"""The pages in a real browser (Debian chromium driven by Playwright) against a live server.

A curator logs in through the form, uploads a zip of three images, watches the progress bar
finish and sees the thumbnails; an annotator is refused the curator pages. With REDIS_URL set the
import runs on a real Celery worker thread consuming from Redis, so the bar really moves.
"""
import io
import os
import uuid
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connections
from PIL import Image as PILImage
from PIL import ImageDraw

from .browser_helpers import CHROMIUM, make_user

# Playwright's sync API runs an event loop in this thread; Django refuses ORM calls from a thread
# with a running loop unless told that it is safe (it is: the loop only drives the browser).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]


def write_zip_of_pngs(path: Path, count: int = 3) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        rows = ["file,caption"]
        for i in range(count):
            img = PILImage.new("RGB", (320, 240), (60 + 60 * i, 110, 200 - 50 * i))
            ImageDraw.Draw(img).ellipse((80 + 20 * i, 50, 240, 190), fill=(250, 220 - 60 * i, 90))
            buffer = io.BytesIO()
            img.save(buffer, format="PNG")
            archive.writestr(f"photo-{i}.png", buffer.getvalue())
            rows.append(f"photo-{i}.png,A yellow ball on a coloured wall number {i}")
        archive.writestr("captions.csv", "\n".join(rows) + "\n")
    return path


@contextmanager
def celery_for_the_live_server():
    """A real worker thread on its own queue when a broker is configured, eager tasks otherwise.

    The queue name is unique per run, so a worker of another test run sharing the same Redis
    cannot take this run's import (its database would not know the job).
    """
    from config.celery import app
    from curation import tasks

    eager_before = app.conf.task_always_eager
    if not django_settings.REDIS_URL:
        app.conf.task_always_eager = True
        try:
            yield "eager"
        finally:
            app.conf.task_always_eager = eager_before
        return

    from celery.contrib.testing.worker import start_worker

    queue = f"test-pages-{uuid.uuid4().hex[:8]}"
    # The worker thread's own connection must close after each task, or it outlives the test and
    # blocks the removal of the test database.
    db_settings = connections["default"].settings_dict
    max_age_before = db_settings.get("CONN_MAX_AGE", 0)
    db_settings["CONN_MAX_AGE"] = 0
    routed = [task._get_current_object() for task in (tasks.run_import, tasks.download_images)]
    app.conf.task_always_eager = False
    for task in routed:
        task.queue = queue
        task._exec_options = None  # Celery caches the send options of a task; drop the cache
    try:
        with start_worker(app, perform_ping_check=False, queues=[queue], pool="solo", shutdown_timeout=30):
            yield "worker"
    finally:
        for task in routed:
            del task.queue
            task._exec_options = None
        app.conf.task_always_eager = eager_before
        db_settings["CONN_MAX_AGE"] = max_age_before


def shot(page, tmp_path, name):
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)


def log_in(page, live_server, username):
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"{username}-pw-123")
    page.click("button:has-text('Log in')")
    page.wait_for_url(f"{live_server.url}/")


def test_a_curator_uploads_a_zip_watches_the_bar_finish_and_sees_the_thumbnails(
    curator, live_server, page, tmp_path
):
    archive = write_zip_of_pngs(tmp_path / "three-photos.zip")
    with celery_for_the_live_server() as mode:
        log_in(page, live_server, "alice")
        assert page.locator("h1").inner_text() == "Welcome, alice"
        shot(page, tmp_path, "curator-home-empty")

        page.click("nav >> text=New import")
        page.fill("input[name=new_collection]", "Browser holiday")
        page.select_option("select[name=kind]", "images")
        page.set_input_files("input[name=file]", str(archive))
        assert page.locator("input[name=sidecar]").input_value() == "captions.csv"
        assert not page.locator("input[name=download_images]").is_visible()  # a TSV-only option
        shot(page, tmp_path, "import-form")
        page.click("button:has-text('Start import')")

        page.wait_for_url("**/imports/*/")
        bar = page.locator("#import-progress progress")
        assert bar.get_attribute("max") == "100"
        # The bar is re-rendered by htmx every second until the job is done.
        page.wait_for_selector('#import-progress progress[value="100"]', timeout=60_000)
        assert page.locator("#import-progress [data-role=percent]").inner_text() == "100%"
        assert page.locator("#import-progress [data-role=status]").inner_text() == "Done"
        counters = page.locator("#import-progress .counters").inner_text()
        assert "IMAGES CREATED\n3" in counters.upper()
        shot(page, tmp_path, f"import-done-{mode}")

        page.click("text=Open the collection")
    page.wait_for_selector(".image-grid img")
    thumbs = page.locator(".image-grid img")
    assert thumbs.count() == 3
    page.wait_for_function(
        "() => [...document.querySelectorAll('.image-grid img')].every(i => i.complete && i.naturalWidth > 0)"
    )
    shot(page, tmp_path, "collection-grid")

    thumbs.first.click()
    page.wait_for_url("**/images/*/")
    page.wait_for_function("() => document.querySelector('.image-figure img').naturalWidth === 320")
    assert "A yellow ball on a coloured wall number 0" in page.locator(".captions").inner_text()
    shot(page, tmp_path, "image-page")

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/collections/")
    shot(page, tmp_path, "phone-collections")
    # On a phone the menu folds behind a toggle that still opens it.
    assert not page.locator("nav.nav").is_visible()
    page.click("label.nav-toggle-label")
    assert page.locator("nav.nav >> text=New import").is_visible()


def test_an_annotator_is_refused_the_import_and_collection_pages(annotator, live_server, page, tmp_path):
    log_in(page, live_server, "bob")
    assert "No campaigns yet" in page.content()
    shot(page, tmp_path, "annotator-home")
    for path in ("/imports/new", "/collections/"):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 403
        assert page.locator("h1").inner_text() == "This page is not for your role"
    shot(page, tmp_path, "annotator-403")
    assert page.locator("nav >> text=New import").count() == 0


def test_an_admins_navigation_fits_one_row_on_a_laptop(transactional_db, django_user_model, live_server, page, tmp_path):
    make_user(django_user_model, "carol", "admin")
    page.set_viewport_size({"width": 1366, "height": 768})
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/")
    shot(page, tmp_path, "admin-nav-1366")
    bar = page.locator("header.topbar").bounding_box()
    assert bar["height"] < 70, f"the top bar is {bar['height']:.0f} px high: its links wrapped"
    for name in ("Collections", "New import", "Campaigns", "Models", "API docs", "Admin", "Log out"):
        link = page.locator("header.topbar").get_by_role("button" if name == "Log out" else "link", name=name, exact=True)
        assert link.is_visible()
        box = link.bounding_box()
        assert box["height"] < 40, f"{name!r} broke over two lines"
