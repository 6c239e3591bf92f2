"""The annotator's work page on a phone, in a real browser (Debian chromium through Playwright,
live server; issue 23).

Bob opens a quality campaign on a 390 x 844 touch screen. He reads the annotator's question, not
the curator's description of how results are reported; the instructions drawer is open on his
first visit and closed when he comes back, so the item is not pushed below the fold; there are no
keyboard hints on a touch screen; Undo appears only once he has answered. Screenshots go under the
test's tmp_path (``screens/``, the visible screen only).
"""
import os

import pytest

from annotation import services
from annotation.kinds import KINDS
from annotation.models import Vote

from .annotation.conftest import make_collection
from .test_browser import CHROMIUM, log_in
from .test_pipeline_browser import with_pictures

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # see test_browser.py

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def quality(transactional_db, curator, annotator):
    return services.campaign_create(
        name="Caption quality", kind="quality", selection={"collection": with_pictures(make_collection()).pk},
        user=curator, members=[annotator], status="running", votes_per_item=1,
        instructions="Say **GOOD** when the caption fits the photo, **BAD** otherwise.")


@pytest.fixture
def phone(browser):
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True, device_scale_factor=2)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def test_the_work_page_on_a_phone_asks_the_question_and_keeps_the_item_in_view(quality, live_server, phone, tmp_path):
    page = phone
    folder = tmp_path / "screens"
    folder.mkdir()

    def phone_shot(page, name):
        # The screen as the phone shows it: a full-page capture re-lays the page out without the
        # touch emulation, so it would draw the keyboard hints this page hides on touch screens.
        page.screenshot(path=str(folder / f"{name}.png"))
    assert page.evaluate("matchMedia('(hover: none) and (pointer: coarse)').matches"), "no touch screen emulated"
    log_in(page, live_server, "bob")
    work = f"{live_server.url}/work/{quality.pk}/"

    # First visit: the drawer is open with the instructions; the question is the annotator's.
    page.goto(work)
    page.wait_for_function("() => document.querySelector('.work-image img').naturalWidth > 0")
    assert page.locator("#instructions").evaluate("d => d.open") is True
    assert page.locator("#instructions strong").first.inner_text() == "GOOD"
    question = page.locator("#task-panel [data-role=question]")
    assert question.inner_text() == KINDS["quality"].question == "Is this a good caption for the image?"
    assert "Reported as" not in page.locator("body").inner_text()
    # no keyboard hints on a touch screen, and nothing to undo yet
    assert page.locator("kbd").count() > 0 and not any(k.is_visible() for k in page.locator("kbd").all())
    assert not page.locator(".keys").is_visible()
    assert page.locator("[data-role=undo-form]").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    phone_shot(page, "phone_first_visit")

    # Second visit: the drawer stays closed, so the item and its answers come first.
    page.reload()
    page.wait_for_function("() => document.querySelector('.work-image img').naturalWidth > 0")
    assert page.locator("#instructions").evaluate("d => d.open") is False
    choices = page.locator("[data-role=choices]").bounding_box()
    assert choices["y"] < PHONE["height"], choices  # the answers start on the first screen
    phone_shot(page, "phone_second_visit")

    # A tap on GOOD and on Submit: the vote is stored and Undo is offered now.
    task = page.locator("#task-panel").get_attribute("data-task")
    page.locator(".choice", has_text="GOOD").tap()
    page.locator("[data-role=vote-form] button[type=submit]").tap()
    page.wait_for_function("old => document.querySelector('#task-panel').dataset.task !== old", arg=task)
    assert Vote.objects.get(task_id=int(task)).value == {"label": "good"}
    undo = page.locator("[data-role=undo-form] button")
    assert undo.is_visible() and "Undo" in undo.inner_text()
    phone_shot(page, "phone_after_vote")
