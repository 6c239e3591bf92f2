"""The model pack as a curator meets it, in a real browser (Debian chromium through Playwright, live server).

Alice runs the conceptual-captions preset with no image-text model registered and reads on the run page that
its model stages were "not run: no model registered". Carol (admin) registers the tiny CLIP on the model-pack
page; Alice embeds the collection from its page, runs the preset again (its model stages now run), runs a
pipeline that groups paraphrased captions, opens "captions like this" from the collection's search, and keeps
one caption of a duplicate cluster.

The photos are the real ones in ../shared/data (skipped where absent); the captions are written here, with
paraphrase pairs planted among unrelated ones. Tasks run eagerly (no worker) unless REDIS_URL is set.
"""
import os
import shutil

import pytest
from django.db import connections
from django.urls import reverse

from curation.models import FilterDecision, FilterRun, Review
from curation.services import pipeline_save
from pack.models import PretrainedModel

from .curation.search_helpers import make_image
from .test_browser import CHROMIUM, log_in, shot
from .test_pipeline_browser import celery_for_filter_tasks
from .test_presets_browser import RUN_TIMEOUT, start_preset_run, step_of

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

CAPTIONS = [
    "a dog runs on the beach", "a dog is running on the beach",
    "a red car parked near a building", "a red car is parked next to a building",
    "a plate of pasta on a wooden table", "snowy mountains under a clear blue sky",
    "children play football in a park", "a small bird sitting on a tree branch",
]
NOT_RUN = "not run: no model registered"


@pytest.fixture
def photos_collection(transactional_db, shared_photos, curator):
    """Eight real photos, one caption each, and a pipeline that groups paraphrases; made before the browser."""
    from curation.models import Caption, Collection

    collection = Collection.objects.create(name="Beach and street photos", language="en")
    for i, (path, text) in enumerate(zip(sorted(shared_photos.glob("*.jpg")), CAPTIONS)):
        image = make_image(collection, path.stem, path.read_bytes(), "JPEG")
        Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT)
    pipeline_save(name="paraphrases", steps=[{"filter": "semantic_duplicates"}], user=curator)
    return collection


@pytest.fixture
def carol_admin(transactional_db, django_user_model):
    from captionlab import roles

    from .test_browser import make_user

    return make_user(django_user_model, "carol", roles.ADMIN)


@pytest.fixture
def tiny_clip_copied(models_dir, _tiny_clip_source):
    """The tiny CLIP's directory under the models dir, not registered yet."""
    shutil.copytree(_tiny_clip_source, models_dir / "tiny-clip")
    return models_dir / "tiny-clip"


@pytest.fixture(autouse=True)
def body_connection_closed(page):
    yield
    connections.close_all()


def run_pipeline(page, name: str, collection) -> FilterRun:
    page.goto(page.url.split("/", 3)[0] + "//" + page.url.split("/", 3)[2] + reverse("pipeline-list"))
    page.get_by_role("link", name=name, exact=True).click()
    page.select_option("#run-collection", label=collection.name)
    page.click("button:has-text('Start run')")
    page.wait_for_url("**/runs/*/", timeout=RUN_TIMEOUT)
    page.wait_for_selector('#run-progress progress[value="100"]', timeout=RUN_TIMEOUT)
    page.wait_for_selector("svg.funnel-chart", timeout=15_000)
    return FilterRun.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))


def test_a_curator_sees_model_stages_not_run_then_registers_a_model_searches_and_reviews_a_cluster(
    photos_collection, carol_admin, tiny_clip_copied, live_server, browser, page, tmp_path
):
    collection = photos_collection
    from config.celery import app

    # 1. No model registered: the preset runs, and its model stages say they were not run.
    with celery_for_filter_tasks():
        log_in(page, live_server, "alice")
        run = start_preset_run(page, "conceptual-captions", collection)
    labels_step = step_of(run, "image_labels")
    note = page.locator(f'table.funnel-table tr[data-step="{labels_step}"] [data-role=model-note]')
    assert note.inner_text() == NOT_RUN
    shot(page, tmp_path, "model-pack-1-not-run")

    # 2. Carol registers the tiny CLIP on the model-pack page.
    admin_context = browser.new_context(viewport={"width": 1280, "height": 900})
    admin = admin_context.new_page()
    log_in(admin, live_server, "carol")
    admin.goto(live_server.url + reverse("pretrained-list"))
    admin.fill("input[name=directory]", "tiny-clip")
    admin.fill("input[name=name]", "tiny-clip")
    admin.fill("input[name=licence]", "MIT (random test weights)")
    admin.click("button:has-text('Register')")
    admin.wait_for_selector("text=Registered tiny-clip@")  # the model's page, with its files and hashes
    shot(admin, tmp_path, "model-pack-2-registered")
    admin_context.close()
    assert PretrainedModel.objects.filter(name="tiny-clip", kind="clip").exists()

    # 3. Alice embeds the collection from its page (the job runs inline without a broker).
    eager_before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        page.goto(live_server.url + collection.get_absolute_url())
        page.click("#model-pack-panel summary")
        page.click("#model-pack-panel button:has-text('Embed')")
        page.wait_for_url("**/models/embeddings/*/")
        page.wait_for_selector("text=Done", timeout=RUN_TIMEOUT)
    finally:
        app.conf.task_always_eager = eager_before

    # 4. The preset again: its image labels now come from the model.
    page.goto(live_server.url + reverse("run-list"))
    with celery_for_filter_tasks():
        rerun = start_preset_run(page, "conceptual-captions", collection)
    assert rerun.pk != run.pk
    assert page.locator(f'table.funnel-table tr[data-step="{labels_step}"] [data-role=model-note]').count() == 0
    assert not FilterDecision.objects.filter(run=rerun, step=labels_step, reason="no_model_registered").exists()

    # 5. The paraphrase pipeline groups the planted pairs (the packaged sentence encoder needs no registration).
    with celery_for_filter_tasks():
        dedupe = run_pipeline(page, "paraphrases", collection)

    # 6. Search the collection, then "captions like this" from a result.
    page.goto(live_server.url + collection.get_absolute_url())
    page.click("a:has-text('Search by meaning')")
    page.fill("#search-q", "puppy at the seaside")
    page.click("button:has-text('Search')")
    page.wait_for_selector(".search-hit")
    first = page.locator(".search-hit").first
    assert "dog" in first.locator(".caption-text").inner_text()
    shot(page, tmp_path, "model-pack-3-search")
    first.locator("a:has-text('captions like this')").click()
    page.wait_for_url("**/captions/*/like")
    page.wait_for_selector(".search-hit")
    assert "a dog" in page.locator(".search-hit .caption-text").first.inner_text()
    shot(page, tmp_path, "model-pack-4-captions-like-this")

    # 7. Review a duplicate cluster: keep the other caption of the pair.
    page.goto(live_server.url + reverse("run-step", args=[dedupe.pk, 0]))
    page.click("[data-role=clusters]")
    page.wait_for_selector(".cluster")
    cluster = page.locator(".cluster").first
    assert cluster.locator(".member").count() == 2
    other = cluster.locator(".member").nth(1)
    member_id = other.get_attribute("data-member")
    assert other.get_attribute("data-final") == "keep"  # clustered for review: nothing is dropped until Alice says
    assert cluster.locator("[data-role=awaiting-review]").count() == 1
    chosen_id = cluster.locator(".member").first.get_attribute("data-member")
    other.locator("button:has-text('Keep only this')").click()
    page.wait_for_selector(f'.cluster .member[data-member="{chosen_id}"][data-final="drop"]')
    page.wait_for_selector(f'.cluster .member[data-member="{member_id}"][data-final="keep"]')
    shot(page, tmp_path, "model-pack-5-cluster-kept")
    decision = FilterDecision.objects.get(run=dedupe, step=0, caption_id=int(member_id))
    assert decision.final_outcome == "keep" and Review.objects.filter(decision__run=dedupe).count() == 2
