"""The link-out flow in a real browser (Debian chromium through Playwright, live server).

A curator launches a link-out campaign from its provider page and copies the public start URL; a
participant arrives with PROLIFIC_PID, STUDY_ID and SESSION_ID, consents, does the training example
and the tasks, gets the completion code and is redirected to the marketplace (intercepted here: no
network); the curator approves the work and downloads the approvals CSV.
Screenshots go under the test's tmp_path (the ``shot`` fixture).
"""
import os
from pathlib import Path

import pytest

from annotation import services
from annotation.models import Assignment, Campaign, Task, Vote
from annotation.providers import money

from .annotation.conftest import make_collection
from .test_browser import CHROMIUM, log_in
from .test_pipeline_browser import with_pictures

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

PID = "60ffe5c8371090c7041d43f8"
DONE_URL = "https://app.prolific.com/submissions/complete?cc={code}"


@pytest.fixture
def campaign(transactional_db, curator):
    c = services.campaign_create(
        name="Fluency study on Prolific", kind="fluency", selection={"collection": with_pictures(make_collection()).pk},
        user=curator, status="draft", votes_per_item=1, backend="linkout", reward_cents=120, budget_cents=1000,
        instructions="Say whether the caption is **fluent English**.")
    c.provider_config = {"consent": "By continuing you agree that your answers are stored with your "
                                    "**participant id** for research.",
                         "completion_code": "CLAB2026", "completion_url": DONE_URL, "places": 2,
                         "tasks_per_assignment": 2}
    c.save()
    services.set_gold(c.tasks.order_by("position").first(), role=Task.Role.TRAINING, value="fluent",
                      feedback="A full sentence reads fluently.")
    return c


def answer(page, value="fluent"):
    old = page.locator("#task-panel").get_attribute("data-task")
    page.check(f"input[name=label][value={value}]")
    page.click("[data-role=vote-form] button[type=submit]")
    page.wait_for_function(
        "old => { const p = document.querySelector('#task-panel'); return p && p.dataset.task !== old; }", arg=old)


def test_a_participant_comes_from_the_marketplace_and_gets_the_code(campaign, live_server, browser, page, shot):
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/provider/")
    shot(page, "provider_draft")
    page.click("[data-role=launch]")
    page.wait_for_selector("[data-role=start-url]")
    assert page.locator("[data-role=provider-status]").inner_text() == "Running"
    start_url = page.locator("[data-role=start-url]").input_value()
    campaign.refresh_from_db()
    assert f"/x/{campaign.public_token}/start?PROLIFIC_PID=" in start_url
    assert page.locator("[data-role=cost-committed]").inner_text() == money.format_cents(2 * 120 + 79)
    shot(page, "provider_launched")

    participant = browser.new_context(viewport={"width": 1100, "height": 850})
    marketplace = []

    def fake_prolific(route):
        marketplace.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<h1>Prolific: submission complete</h1>")

    participant.route("https://app.prolific.com/**", fake_prolific)
    p = participant.new_page()
    p.set_default_timeout(15_000)
    base = start_url.split("?")[0]
    p.goto(f"{base}?PROLIFIC_PID={PID}&STUDY_ID=6100aa11bb22cc33dd44ee55&SESSION_ID=sess0001")
    p.wait_for_selector("[data-role=consent]")
    assert "participant id" in p.locator("[data-role=consent-text] strong").inner_text()
    shot(p, "consent")
    p.click("[data-role=agree]")

    p.wait_for_selector("#task-panel[data-stage=training]")
    shot(p, "training")
    answer(p)
    p.wait_for_selector("[data-role=feedback]")
    p.click("[data-role=continue]")
    for n in range(2):
        p.wait_for_selector("#task-panel[data-stage=work]")
        if n == 0:
            shot(p, "task")
        answer(p)
    p.wait_for_selector("[data-role=finish]")
    shot(p, "finish_button")
    p.click("[data-role=finish]")
    p.wait_for_selector("[data-role=completion-code]")
    assert p.locator("[data-role=completion-code]").inner_text() == "CLAB2026"
    assert p.locator("[data-role=redirect]").get_attribute("href") == DONE_URL.replace("{code}", "CLAB2026")
    shot(p, "complete")
    p.wait_for_url("https://app.prolific.com/**", timeout=20_000)
    assert marketplace and marketplace[-1].endswith("cc=CLAB2026")

    # the same browser under a second participant id is refused
    p.goto(f"{base}?PROLIFIC_PID=70ffe5c8371090c7041d43f9&STUDY_ID=6100aa11bb22cc33dd44ee55&SESSION_ID=sess0002")
    assert "another participant id" in p.locator("[data-role=refused-message]").inner_text()
    shot(p, "second_id")
    participant.close()

    assignment = Assignment.objects.get(campaign=campaign)
    assert assignment.state == "submitted" and assignment.worker.external_id == PID
    assert Vote.objects.filter(assignment=assignment, role="real", quarantined=True).count() == 2

    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/provider/")
    row = page.locator(f"tr[data-assignment='{assignment.pk}']")
    row.locator("[data-role=approve]").click()
    page.wait_for_selector(f"tr[data-assignment='{assignment.pk}'] [data-role=state]:has-text('Approved')")
    with page.expect_download() as download:
        page.click("[data-role=export-approvals]")
    assert Path(download.value.path()).read_text() == f"{PID}\n"
    assert page.locator("[data-role=cost-spent]").inner_text() == money.format_cents(120 + 40)
    shot(page, "provider_approved")
    assert Campaign.objects.get(pk=campaign.pk).status == "running"
    assert not Vote.objects.filter(assignment=assignment, quarantined=True).exists()
