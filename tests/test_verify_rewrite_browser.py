"""A verify-rewrite campaign on the work page, in a real browser (Debian chromium through Playwright,
live server; issue 24).

Bob verifies hypernymization's guesses over a lab's news photos with the keyboard only: he reads the
original caption and the rewrite with the guessed name marked, presses 2 (Fix), which puts the cursor
in the correction box, types the right rewrite and presses Enter; on the next item he presses 1 (Keep)
and Enter. Both answers are stored as he gave them. Screenshots go under the test's tmp_path.
"""
import os

import pytest

from annotation import services
from annotation.models import Vote

from .annotation.test_verify_rewrites import CASTLE, GIZA
from .curation.release_helpers import news_desk, review_guesses_run
from .test_browser import CHROMIUM, log_in

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # see test_browser.py

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

# Two rewrites that rest on a guess ("Giza" and "Neuschwanstein" taken for people) and one certain.
CAPTIONS = [GIZA, CASTLE, "A woman walks her dog along the river in autumn."]


@pytest.fixture
def verify_campaign(transactional_db, curator, annotator):
    run = review_guesses_run(news_desk(CAPTIONS, seed0=90, prefix="desk"))
    return services.campaign_create(
        name="Verify the guesses", kind="verify_rewrite", user=curator, members=[annotator], status="running",
        votes_per_item=1, selection={"collection": run.collection_id, "run": run.pk, "step": 0,
                                     "reason": "uncertain_rewrite"})


def test_fix_and_keep_with_the_keyboard(verify_campaign, live_server, browser, tmp_path):
    assert verify_campaign.tasks.count() >= 2, "the captions should give at least two uncertain rewrites"
    folder = tmp_path / "screens"
    folder.mkdir()
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.set_default_timeout(15_000)
    log_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/work/{verify_campaign.pk}/")
    page.wait_for_function("() => document.querySelector('.work-image img').naturalWidth > 0")
    panel = page.locator("#task-panel")
    text = panel.inner_text()
    assert "pyramids of giza" in text.lower() or "neuschwanstein" in text.lower()  # the original is shown
    page.screenshot(path=str(folder / "verify_first.png"), full_page=True)

    first = panel.get_attribute("data-task")
    page.keyboard.press("2")  # Fix: the cursor goes to the correction box
    fix = page.locator("[data-role=fix-input]")
    assert fix.evaluate("el => el === document.activeElement")
    fix.fill("tourists ride camels near the pyramids.")
    page.screenshot(path=str(folder / "verify_fix_typed.png"), full_page=True)
    fix.press("Enter")
    page.wait_for_function("old => document.querySelector('#task-panel').dataset.task !== old", arg=first)
    assert Vote.objects.get(task_id=int(first)).value == {"label": "fix",
                                                          "text": "tourists ride camels near the pyramids."}

    second = panel.get_attribute("data-task")
    page.locator("body").click(position={"x": 5, "y": 5})  # the focus away from any field
    page.keyboard.press("1")  # Keep
    page.keyboard.press("Enter")
    page.wait_for_function("old => document.querySelector('#task-panel').dataset.task !== old", arg=second)
    assert Vote.objects.get(task_id=int(second)).value["label"] == "keep"
    page.screenshot(path=str(folder / "verify_after.png"), full_page=True)
    page.close()
