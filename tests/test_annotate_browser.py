"""The annotator's work page in a real browser (Debian chromium through Playwright, live server).

An annotator logs in, passes the training examples, rates five items with the keyboard only
(number keys and Enter), reloads and finds the progress kept and the same item held, undoes the
last answer with the "u" key and changes it, then writes a caption in a writing campaign while the
length counter follows; a curator then reads the vote count on the campaign's dashboard.
Screenshots of the page on a desktop and a phone go under the test's tmp_path (the ``shot`` fixture).
"""
import os

import pytest
from django.urls import reverse

from annotation import services
from annotation.models import Task, Vote, VoteEdit
from curation.models import Caption

from .annotation.conftest import make_collection
from .test_browser import CHROMIUM, log_in
from .test_pipeline_browser import with_pictures

# Playwright's sync API runs an event loop in this thread; the ORM calls here are safe (see test_browser).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

INSTRUCTIONS = """Read the caption and say whether it is **fluent English**.

- *Fluent*: a sentence a careful writer could have written.
- *Not fluent*: words missing, broken grammar.
- <script>alert("instructions")</script> is shown as text.
"""


@pytest.fixture
def campaigns(transactional_db, curator, annotator):
    # Made before the browser starts: see the note on the browser fixture in test_browser.py.
    rating = services.campaign_create(
        name="Fluency of alt-texts", kind="fluency", selection={"collection": with_pictures(make_collection()).pk},
        user=curator, members=[annotator], status="running", votes_per_item=1, instructions=INSTRUCTIONS)
    first, second = rating.tasks.order_by("position")[:2]
    services.set_gold(first, role=Task.Role.TRAINING, value="fluent",
                      feedback="A complete sentence with a subject and a verb reads **fluently**.")
    services.set_gold(second, role=Task.Role.TRAINING, value="fluent", feedback="Still a full sentence.")
    writing = services.campaign_create(
        name="Describe the photos", kind="write",
        selection={"collection": with_pictures(make_collection(name="to describe", n=3)).pk},
        user=curator, members=[annotator], status="running", text_min_chars=15, text_max_chars=120,
        instructions="One sentence: who or what, doing what, where.")
    return rating, writing


def panel_task(page) -> str:
    return page.locator("#task-panel").get_attribute("data-task")


def wait_for_new_task(page, old: str):
    page.wait_for_function(
        "old => { const p = document.querySelector('#task-panel'); return p && p.dataset.task && p.dataset.task !== old; }",
        arg=old)


def test_an_annotator_trains_rates_with_the_keyboard_undoes_and_writes(campaigns, live_server, browser, page, shot):
    rating, writing = campaigns
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, live_server, "bob")

    # Home: both campaigns with a Start button.
    row = page.locator(f'#campaigns li[data-campaign="{rating.pk}"]')
    assert row.locator("[data-role=done]").inner_text() == "0"
    assert row.locator("[data-role=remaining]").inner_text() == "10"
    shot(page, "home")
    row.locator("text=Start").click()
    page.wait_for_url(f"**/work/{rating.pk}/")

    # The instructions drawer is open on the first visit; the script in them is text.
    drawer = page.locator("#instructions")
    assert drawer.locator("strong", has_text="fluent English").is_visible()
    assert 'alert("instructions")' in drawer.inner_text() and not dialogs

    # Two training examples, from the keyboard: 2 (not fluent) is wrong, then 1 (fluent) is right.
    assert "Training example 1 of 2" in page.locator("[data-role=stage]").inner_text()
    shot(page, "training")
    page.keyboard.press("2")
    assert page.locator('input[name=label][value=not_fluent]').is_checked()
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-role=feedback]")
    assert "Not quite" in page.locator("[data-role=verdict]").inner_text()
    assert page.locator("[data-role=expected]").inner_text() == "Fluent"
    assert page.locator("[data-role=explanation] strong").inner_text() == "fluently"
    shot(page, "training_feedback")
    page.keyboard.press("Enter")  # Continue
    page.wait_for_selector("text=Training example 2 of 2")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-role=feedback].is-correct")
    page.keyboard.press("Enter")
    page.wait_for_selector('#task-panel[data-stage="work"]')

    # Five real items rated with the number keys and Enter, each swapped in without a page load.
    page.evaluate("window.__samePage = true")
    labels = ["fluent", "not_fluent", "difficult", "fluent", "not_fluent"]
    keys = {"fluent": "1", "not_fluent": "2", "difficult": "3"}
    rated = []
    for n, label in enumerate(labels, start=1):
        task = panel_task(page)
        caption = Task.objects.select_related("caption").get(pk=task).caption.text
        assert page.locator("[data-role=caption]").inner_text() == caption
        if n == 1:
            page.wait_for_function("() => document.querySelector('.work-image img').naturalWidth > 0")
            shot(page, "desktop")
            page.wait_for_timeout(400)  # some time on the item, measured by the page
        page.keyboard.press(keys[label])
        page.keyboard.press("Enter")
        wait_for_new_task(page, task)
        assert page.locator("#task-panel [data-role=done]").inner_text() == str(n)
        rated.append(int(task))
    assert page.evaluate("window.__samePage") is True  # no full page load happened
    votes = {v.task_id: v for v in Vote.objects.filter(campaign=rating, role=Task.Role.REAL)}
    assert sorted(votes) == sorted(rated)
    assert [votes[t].value["label"] for t in rated] == labels
    assert votes[rated[0]].seconds >= 0.3  # the page's own clock, not the reservation's

    # A reload keeps the progress and shows the same held item.
    held = panel_task(page)
    page.reload()
    assert page.locator("#task-panel [data-role=done]").inner_text() == "5"
    assert page.locator("#task-panel [data-role=remaining]").inner_text() == "5"
    assert panel_task(page) == held

    # "u" re-opens the last answer (not fluent), 3 changes it to "difficult", Enter saves it.
    page.keyboard.press("u")
    page.wait_for_selector("[data-role=editing]")
    assert panel_task(page) == str(rated[-1])
    assert page.locator('input[name=label][value=not_fluent]').is_checked()
    shot(page, "undo")
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "held => { const p = document.querySelector('#task-panel'); return p.dataset.task === held && !p.querySelector('[data-role=editing]'); }",
        arg=held)
    edit = VoteEdit.objects.get(vote__task_id=rated[-1])
    assert (edit.old_value, edit.new_value) == ({"label": "not_fluent"}, {"label": "difficult"})
    assert Vote.objects.filter(campaign=rating, role=Task.Role.REAL).count() == 5

    # The same page on a phone: the image scales, the buttons stay large.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.wait_for_function("() => document.querySelector('.work-image img').naturalWidth > 0")
    image_box = page.locator(".work-image img").bounding_box()
    assert image_box["width"] <= 390
    choice_box = page.locator(".choice").first.bounding_box()
    assert choice_box["height"] >= 44 and choice_box["width"] >= 300
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the screen
    shot(page, "phone")
    page.set_viewport_size({"width": 1280, "height": 800})

    # A caption in the writing campaign, with the live length counter and language note.
    page.goto(f"{live_server.url}/work/{writing.pk}/")
    box = page.locator("[data-role=caption-input]")
    assert page.evaluate("document.activeElement.name") == "text"
    page.keyboard.type("A red boat")
    assert page.locator("[data-role=count]").inner_text() == "10"
    assert "is-short" in page.locator("[data-role=length]").get_attribute("class")
    text = "A red boat rests in the harbour at dawn near the old pier."
    box.fill("")
    page.keyboard.type(text)
    assert page.locator("[data-role=count]").inner_text() == str(len(text))
    assert "is-ok" in page.locator("[data-role=length]").get_attribute("class")
    assert page.locator("[data-role=language]").inner_text() == ""  # no guess in the browser: the server checks
    shot(page, "write")
    task = panel_task(page)
    page.keyboard.press("Enter")
    wait_for_new_task(page, task)
    caption = Caption.objects.get(origin=Caption.Origin.CROWD)
    assert caption.text == text and caption.image_id == Task.objects.get(pk=task).image_id
    assert page.locator("#task-panel [data-role=done]").inner_text() == "1"

    # Over the limit: the counter turns red, the server refuses and the typed text stays.
    long_text = "A very long caption " * 8
    page.locator("[data-role=caption-input]").fill(long_text)
    page.locator("[data-role=caption-input]").press("End")
    page.keyboard.type("!")
    assert "is-long" in page.locator("[data-role=length]").get_attribute("class")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-role=error]")
    assert "too long" in page.locator("[data-role=error]").inner_text()
    assert page.locator("[data-role=caption-input]").input_value() == long_text + "!"
    page.wait_for_selector("[data-role=length].is-long")  # the counter still says so in the new panel
    assert page.locator("[data-role=count]").inner_text() == str(len(" ".join((long_text + "!").split())))
    shot(page, "write_error")

    # German in an English campaign: the server says so and the typed text stays.
    german = "Ein rotes Boot liegt bei Sonnenaufgang im alten Hafen."
    page.locator("[data-role=caption-input]").fill(german)
    page.locator("[data-role=caption-input]").press("Enter")
    page.wait_for_function("() => (document.querySelector('[data-role=error]') || {}).innerText?.includes('German')")
    assert "asks for captions in English" in page.locator("[data-role=error]").inner_text()
    assert page.locator("[data-role=caption-input]").input_value() == german
    assert not dialogs

    # The curator's dashboard shows the votes.
    dashboard = reverse("campaign-detail", args=[rating.pk])
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    curator_page = context.new_page()
    curator_page.set_default_timeout(15_000)
    try:
        log_in(curator_page, live_server, "alice")
        curator_page.goto(f"{live_server.url}{dashboard}")
        stored = services.progress(rating)["votes"]
        assert stored == 5
        assert curator_page.locator("#campaign-votes").inner_text().strip().replace(",", "") == str(stored)
        shot(curator_page, "dashboard")
    finally:
        context.close()


@pytest.fixture
def candidates_campaign(transactional_db, curator, annotator):
    collection = with_pictures(make_collection(name="candidates", n=2, captions_per_image=3))
    return services.campaign_create(name="Relevance and fluency", kind="relevance_fluency",
                                    selection={"collection": collection.pk}, user=curator, members=[annotator],
                                    status="running", votes_per_item=1)


def test_a_candidate_grid_is_rated_row_by_row_with_number_keys(candidates_campaign, live_server, page, shot):
    campaign = candidates_campaign
    log_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/work/{campaign.pk}/")
    rows = page.locator("[data-role=rating-row]")
    assert rows.count() == 6  # three captions, relevance and fluency each
    # The focus starts on the first row; each number rates the focused row and moves on.
    assert page.evaluate("document.activeElement.closest('[data-role=rating-row]') !== null")
    keys = ["4", "5", "3", "2", "5", "1"]
    for key in keys:
        page.keyboard.press(key)
    shown = [int(c) for c in page.eval_on_selector_all(".candidate", "els => els.map(e => e.dataset.caption)")]
    page.set_viewport_size({"width": 1280, "height": 800})
    shot(page, "candidates")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "candidates_phone")
    task = panel_task(page)
    page.keyboard.press("Enter")
    wait_for_new_task(page, task)
    ratings = Vote.objects.get(campaign=campaign).value["ratings"]
    expected = {str(cid): {"relevance": int(keys[2 * i]), "fluency": int(keys[2 * i + 1])}
                for i, cid in enumerate(shown)}
    assert ratings == expected
