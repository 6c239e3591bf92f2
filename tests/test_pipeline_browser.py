"""The curator review pages in a real browser (Debian chromium through Playwright, live server).

A curator opens a finished run, reads the funnel, overrides one decision from the keyboard and one
with a button, sees the counts change, sees a transformed caption next to its raw text with the
removed words struck through, and moves a threshold to see what would change. A second test
starts a run from the pipeline page and watches its progress bar finish; with REDIS_URL set the
run goes through a real Celery worker thread consuming from Redis.
"""
import io
import os
import uuid
from contextlib import contextmanager

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.db import connections
from PIL import Image as PILImage
from PIL import ImageDraw

from curation.models import FilterDecision, Pipeline

from .test_browser import CHROMIUM, log_in, shot
from .test_pipeline_pages import SCRIPT, STEPS, WORDS, make_collection, make_run

# Playwright's sync API runs an event loop in this thread; the ORM calls here are safe (see test_browser).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]


@pytest.fixture(autouse=True)
def body_connection_closed(page):
    """Close the database connection the test's body opened before the browser stops: while
    Playwright's loop runs, Django keeps it in an async-context slot that no later teardown sees, and
    the test database could not be dropped at the end of the session."""
    yield
    connections.close_all()


def picture(i: int, fmt: str) -> bytes:
    img = PILImage.new("RGB", (320, 240), (40 + 45 * i, 120, 210 - 35 * i))
    ImageDraw.Draw(img).rectangle((60 + 10 * i, 60, 260, 200), fill=(250, 210 - 30 * i, 80))
    buffer = io.BytesIO()
    img.save(buffer, format=fmt)
    return buffer.getvalue()


def with_pictures(collection):
    """Give every image of the collection a file and a thumbnail, so the rows show real pictures."""
    for i, image in enumerate(collection.images.order_by("pk")):
        image.file.save(f"{image.pk}.jpg", ContentFile(picture(i, "JPEG")), save=False)
        image.thumbnail.save(f"{image.pk}-thumb.jpg", ContentFile(picture(i, "JPEG")), save=False)
        image.save()
    return collection


@pytest.fixture
def finished_run(transactional_db, curator):
    # Made before the browser starts: see the note on the browser fixture in test_browser.py.
    return make_run(with_pictures(make_collection()), user=curator, name="review pipeline")


def count(page, tab: str) -> str:
    return page.locator(f'#outcome-tabs a[data-tab="{tab}"] [data-role=count]').inner_text()


def test_a_curator_reads_the_funnel_overrides_two_decisions_and_sees_a_transformed_caption(
    finished_run, live_server, page, tmp_path
):
    run = finished_run
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server, "alice")
    page.click("nav >> text=Runs")
    page.click(f'a[href="/runs/{run.pk}/"] >> nth=0')
    page.wait_for_url(f"**/runs/{run.pk}/")

    # The funnel: 5 images, 1 too narrow; 7 captions enter the word count, which drops 3 (42.9 %).
    assert page.locator("svg.funnel-chart").is_visible()
    assert page.locator("svg.funnel-chart .funnel-row").count() == 4
    words = page.locator(f'tr[data-step="{WORDS}"]')
    assert words.locator("[data-role=entered]").inner_text() == "7 100.0%"
    assert words.locator("[data-role=dropped]").inner_text() == "3 42.9%"
    assert page.locator('tr[data-step="0"] [data-role=dropped]').inner_text() == "1 20.0%"
    assert page.locator("#run-progress [data-role=percent]").inner_text() == "100%"
    shot(page, tmp_path, "run-funnel")

    # The chart's bars are links to each step's decisions.
    page.locator(f'svg.funnel-chart a[href="/runs/{run.pk}/steps/{WORDS}/"]').click()
    page.wait_for_url(f"**/runs/{run.pk}/steps/{WORDS}/")
    page.wait_for_function("() => [...document.querySelectorAll('.decision img')].every(i => i.complete && i.naturalWidth > 0)")
    assert (count(page, "keep"), count(page, "drop")) == ("4", "3")
    rows = page.locator(".decision")
    assert rows.count() == 3
    first_id, second_id, third_id = (rows.nth(i).get_attribute("id") for i in range(3))

    # One override from the keyboard: j moves to the first row, n writes a note, a keeps it.
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.id") == first_id
    page.keyboard.press("n")
    page.keyboard.type("short, but it says what is there")
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") == first_id
    page.keyboard.press("a")
    page.wait_for_selector(f'#{first_id}[data-final="keep"]')
    assert (count(page, "keep"), count(page, "drop")) == ("5", "2")
    # The focus moved on to the next row, ready for the next key.
    page.wait_for_function(f"() => document.activeElement.id === '{second_id}'")
    assert "short, but it says what is there" in page.locator(f"#{first_id} .review-note").inner_text()

    # One with the mouse: the Keep button of the third row.
    page.locator(f"#{third_id} button[data-outcome=keep]").click()
    page.wait_for_selector(f'#{third_id}[data-final="keep"]')
    assert (count(page, "keep"), count(page, "drop")) == ("6", "1")
    shot(page, tmp_path, "step-overrides")
    decided = FilterDecision.objects.filter(run=run, step=WORDS).exclude(override="")
    assert sorted(d.final_outcome for d in decided) == ["keep", "keep"]

    # What if max_words were 5? The three kept six-word captions would go.
    page.fill("#th-max_words", "5")
    page.wait_for_selector("[data-role=to-drop]")
    assert page.locator("[data-role=to-drop]").inner_text() == "3"
    assert page.locator("line.threshold.proposed").count() == 1
    page.locator("#histogram").screenshot(path=str(tmp_path / "what-if.png"))
    shot(page, tmp_path, "step-what-if")

    # The caption with a script tag is text on the page, and nothing ran.
    page.click('#outcome-tabs a[data-tab="keep"]')
    page.wait_for_selector(f"text={SCRIPT}")
    assert not dialogs

    # The funnel counts the overrides.
    page.click("text=Funnel")
    page.wait_for_url(f"**/runs/{run.pk}/")
    assert page.locator(f'tr[data-step="{WORDS}"] [data-role=dropped]').inner_text() == "1 14.3%"

    # A transform: the raw text with the removed words struck through, next to the new text.
    page.goto(f"{live_server.url}/runs/{run.pk}/steps/1/?tab=keep")
    row = page.locator(".decision", has=page.locator(".raw-text del"))
    assert row.count() == 1
    struck = row.locator(".raw-text del")
    assert struck.text_content() == "stock photo "
    assert page.evaluate("e => getComputedStyle(e).textDecorationLine", struck.element_handle()) == "line-through"
    assert row.locator(".raw-text").inner_text() == "stock photo a dog on a beach"
    assert row.locator(".after-text").inner_text() == "a dog on a beach"
    shot(page, tmp_path, "transform-step")
    page.goto(f"{live_server.url}/runs/{run.pk}/steps/2/?tab=keep")
    assert page.locator(".raw-text del").first.inner_text() == "Harrison Ford"
    assert page.locator(".after-text ins").first.inner_text() == "actor"

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/runs/{run.pk}/steps/{WORDS}/?tab=keep")
    shot(page, tmp_path, "phone-step")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    shot(page, tmp_path, "phone-run")


@contextmanager
def celery_for_filter_tasks():
    """A real worker thread on its own queue when a broker is configured, eager tasks otherwise
    (the same arrangement as test_browser.celery_for_the_live_server, for the filter tasks)."""
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

    queue = f"test-filters-{uuid.uuid4().hex[:8]}"
    db_settings = connections["default"].settings_dict
    max_age_before = db_settings.get("CONN_MAX_AGE", 0)
    db_settings["CONN_MAX_AGE"] = 0
    routed = [task._get_current_object() for task in (tasks.filter_start, tasks.filter_chunk)]
    app.conf.task_always_eager = False
    for task in routed:
        task.queue = queue
        task._exec_options = None
    try:
        with start_worker(app, perform_ping_check=False, queues=[queue], pool="solo", shutdown_timeout=30):
            yield "worker"
    finally:
        for task in routed:
            del task.queue
            task._exec_options = None
        app.conf.task_always_eager = eager_before
        db_settings["CONN_MAX_AGE"] = max_age_before


@pytest.fixture
def pipeline_and_collection(transactional_db, curator):
    collection = with_pictures(make_collection("Browser run"))
    return Pipeline.objects.create(name="review steps", steps=STEPS), collection


def test_a_curator_starts_a_run_and_watches_the_progress_bar_finish(
    pipeline_and_collection, live_server, page, tmp_path
):
    pipeline, collection = pipeline_and_collection
    with celery_for_filter_tasks() as mode:
        log_in(page, live_server, "alice")
        page.click("nav >> text=Pipelines")
        # The seed presets are there, next to the curator's own pipeline.
        assert page.locator("text=conceptual-captions").count() >= 1
        shot(page, tmp_path, "pipelines")
        page.click("text=review steps")
        page.wait_for_url(f"**/pipelines/{pipeline.pk}/")
        assert page.locator(".step").count() == 4
        # Tune a parameter and save (htmx posts the form; the page reloads with the saved steps).
        page.fill("#step-3-min_words", "2")
        page.click(".save-bar button[value=save]")
        page.wait_for_selector("text=Saved “review steps”.")
        pipeline.refresh_from_db()
        assert pipeline.steps[WORDS] == {"filter": "test_pp_words", "params": {"min_words": 2}}
        shot(page, tmp_path, "pipeline-editor")

        page.select_option("#run-collection", label=collection.name)
        page.click("button:has-text('Start run')")
        page.wait_for_url("**/runs/*/")
        page.wait_for_selector('#run-progress progress[value="100"]', timeout=60_000)
        assert page.locator("#run-progress [data-role=status]").inner_text() == "Done"
        # The results load by themselves once the bar says done.
        page.wait_for_selector("svg.funnel-chart", timeout=15_000)
        # With min_words 2, "two cats" stays: the word count drops 2 of 7.
        assert page.locator(f'tr[data-step="{WORDS}"] [data-role=dropped]').inner_text() == "2 28.6%"
        shot(page, tmp_path, f"run-done-{mode}")
