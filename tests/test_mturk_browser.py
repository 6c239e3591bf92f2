"""An MTurk campaign's whole life in a real browser (Debian chromium through Playwright) against a
local server that answers MTurk's JSON protocol (tests/annotation/fake_mturk.py), with boto3
pointed at it through endpoint_url, so the real serialization and signing path runs.

The campaign is launched through the publish task (eager Celery); two workers preview the HIT,
accept it, open the ExternalQuestion page with MTurk's parameters, answer their items on the
platform's pages and finish: the auto-submitting form posts the assignmentId to the fake server's
/mturk/externalSubmit. The sync confirms both, the curator approves one, rejects one, bonuses
the approved one, finishes; the ledger equals what the server paid."""
import os

import pytest
from django.db import connections
from django.urls import reverse

from annotation import services
from annotation.models import Assignment, Campaign, LedgerEntry, ProviderJob, Vote
from annotation.providers import money, sync
from annotation.providers.base import get_provider
from annotation.tasks_providers import provider_publish

from .annotation.conftest import make_collection
from .annotation.fake_mturk import FakeMTurk
from .test_browser import CHROMIUM
from .test_pipeline_browser import with_pictures

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]


@pytest.fixture
def fake(settings, monkeypatch):
    server = FakeMTurk().start()
    settings.MTURK_ENDPOINT_URL = server.url
    settings.MTURK_BACKOFF_SECONDS = 0.001
    settings.PUBLIC_BASE_URL = "https://captions.example.org"
    settings.MTURK_ALLOW_LOCAL_SUBMIT = True
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDBROWSERTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield server
    server.stop()


@pytest.fixture
def launched(transactional_db, fake, eager_celery, django_user_model):
    """Made and published before the browser starts (see the note on test_browser's fixture)."""
    curator = django_user_model.objects.create_user(username="mturkcurator", password="x-pw-123456")
    c = services.campaign_create(
        name="Fluency on MTurk", kind="fluency", selection={"collection": with_pictures(make_collection(n=4)).pk},
        user=curator, status="draft", votes_per_item=1, backend="mturk", reward_cents=10, budget_cents=1000,
        instructions="Say whether the caption is **fluent English**.")
    c.provider_config = {"tasks_per_assignment": 2, "max_assignments": 2, "frame_height": 720,
                         "qualifications": {"approval_rate": 95, "locales": ["US", "GB"]},
                         "review": {"manual": True}}
    c.save()
    result = provider_publish.delay(c.pk).get()
    assert result["state"] == "done", result
    c.refresh_from_db()
    return c


def do_hit(browser, live_server, fake, campaign, hit_id, worker_id):
    context = browser.new_context(viewport={"width": 1100, "height": 850})
    page = context.new_page()
    page.set_default_timeout(15_000)
    url = f"{live_server.url}{reverse('mturk-task', args=[campaign.pk])}"
    page.goto(f"{url}?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId={hit_id}")
    assert "Accept the HIT to start" in page.locator("[data-role=accept-hint]").inner_text()
    assert page.locator("[data-role=mturk-preview] button[type=submit]").is_disabled()
    assignment_id = fake.accept(hit_id, worker_id)
    page.goto(f"{url}?assignmentId={assignment_id}&hitId={hit_id}&workerId={worker_id}&turkSubmitTo={fake.url}")
    page.wait_for_url(f"**/work/{campaign.pk}/**")
    for _ in range(2):
        page.wait_for_selector("[data-role=vote-form]")
        old = page.locator("#task-panel").get_attribute("data-task")
        page.check("input[name=label][value=fluent]")
        page.click("[data-role=vote-form] button[type=submit]")
        page.wait_for_function(
            "old => { const p = document.querySelector('#task-panel'); return !p || p.dataset.task !== old; }", arg=old)
    page.wait_for_selector("[data-role=finish]")
    page.click("[data-role=finish]")
    page.wait_for_selector("#mturk-done")  # the auto-submitting form reached MTurk's externalSubmit
    context.close()
    return assignment_id


def test_an_mturk_campaign_from_launch_to_payment(launched, fake, live_server, browser):
    campaign = launched
    jobs = list(ProviderJob.objects.filter(campaign=campaign).order_by("pk"))
    assert [j.status for j in jobs] == ["published", "published"]
    question = fake.hits[jobs[0].external_id]["Question"]
    assert f"<ExternalURL>https://captions.example.org/mturk/{campaign.pk}/</ExternalURL>" in question
    assert "<FrameHeight>720</FrameHeight>" in question

    first = do_hit(browser, live_server, fake, campaign, jobs[0].external_id, "AWORKERONE")
    second = do_hit(browser, live_server, fake, campaign, jobs[1].external_id, "AWORKERTWO")
    assert [s["assignmentId"] for s in fake.external_submits] == [first, second]
    assert {fake.assignments[a]["AssignmentStatus"] for a in (first, second)} == {"Submitted"}
    assert Vote.objects.filter(campaign=campaign, quarantined=True).count() == 4  # not confirmed yet

    provider = get_provider("mturk")
    report = sync.sync_campaign(campaign)
    assert report["confirmed"] == 2 and report["held"] == 2, report
    assert not Vote.objects.filter(campaign=campaign, quarantined=True).exists()
    one = Assignment.objects.get(provider_assignment_id=first)
    two = Assignment.objects.get(provider_assignment_id=second)
    assert (one.state, two.state, one.tasks_done) == ("submitted", "submitted", 2)

    sync.approve(campaign, provider, one, "Thank you!")
    sync.reject(campaign, provider, two, "Every answer was the same without reading the captions.")
    one.refresh_from_db()
    provider.bonus(one, 25, "Careful work", f"mturk:{first}:manual-bonus")
    provider.finish(campaign)
    report = sync.sync_campaign(campaign)
    assert report.get("deleted") == 2, report

    assert fake.assignments[first]["AssignmentStatus"] == "Approved"
    assert fake.assignments[second]["AssignmentStatus"] == "Rejected"
    paid = fake.paid_cents()
    summary = money.summary(campaign)
    assert paid == {"rewards": 10, "bonuses": 25, "total": 35}
    assert (summary["rewards"], summary["bonuses"]) == (paid["rewards"], paid["bonuses"])
    assert summary["fees"] == 2 + 5 and summary["committed"] == 0 and summary["spent"] == 42
    assert LedgerEntry.objects.filter(campaign=campaign, state="paid", kind="reward").count() == 1
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.FINISHED
    connections.close_all()  # the ORM calls made while Playwright's loop ran opened their own connection
