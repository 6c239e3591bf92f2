"""The learning loop in a real browser (Debian chromium through Playwright, live server, eager Celery).

Alice (curator) opens a fluency campaign that two raters have started to label, starts a learning loop
from its page, presses Next round and waits for the round to finish (eager Celery runs it inside the
request); more votes come in; she presses Next round again and reads the learning curve with two
rounds and the rounds table with two rows. The trainer is the real "fluency-encoder" with its default
config, as the campaign page starts it. The page, the chart alone and the campaign page's card are saved
under the test's tmp_path (the ``shot`` fixture).
"""
import os
import re

import pytest
from django.db import connections
from django.template.defaultfilters import floatformat
from django.urls import reverse

from captionlab import roles
from modeling import registry
from modeling.models import LearningLoop, LoopRound

from .modeling.loop_helpers import make_pool_campaign, next_tasks, vote
from .test_browser import CHROMIUM, log_in, make_user

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # see test_browser.py

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

ROUND = 300_000  # ms: eager Celery runs the whole round (train, compare, random arm, re-score) in the request


@pytest.fixture
def setup(transactional_db, django_user_model, settings, eager_celery):
    # Everything in the database before the browser starts (see test_browser's browser fixture).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    registry.clear_cache()
    alice = make_user(django_user_model, "alice", roles.CURATOR)
    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=120, name="loop browser fluency")
    vote(campaign, truth, next_tasks(campaign, 60), raters)
    return {"campaign": campaign, "truth": truth, "raters": raters}


def test_a_curator_starts_a_loop_runs_two_rounds_and_reads_the_learning_curve(setup, live_server, page, shot):
    try:
        walk_through(setup, live_server, page, shot)
    finally:
        connections.close_all()  # ORM calls ran while Playwright's loop was running (see test_release_browser)


def next_round(page, loop, number: int) -> LoopRound:
    with page.expect_navigation(url=re.compile(r".*/models/loops/\d+/$"), timeout=ROUND):
        page.click("button[data-role=next-round]", no_wait_after=True)
    page.wait_for_selector(f'#loop-round[data-round="{number}"][data-status="done"]', timeout=ROUND)
    round_ = LoopRound.objects.get(loop=loop, number=number)
    assert round_.status == "done", round_.error
    return round_


def walk_through(setup, live_server, page, shot):
    campaign = setup["campaign"]
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}{reverse('campaign-detail', args=[campaign.pk])}")

    # (1) The campaign page's card starts the loop.
    card = page.locator("#learning-loop")
    assert card.locator("h2").inner_text() == "Learning loop"
    assert card.locator("select[name=sampler]").input_value() == "hybrid"
    card.locator("input[name=batch_size]").fill("20")
    shot(card, "loop_campaign_card")
    with page.expect_navigation(url=re.compile(r".*/models/loops/\d+/$")):
        card.locator("button[data-role=start-loop]").click()
    loop = LearningLoop.objects.get(campaign=campaign)
    assert page.url.endswith(loop.get_absolute_url()) and loop.batch_size == 20
    assert "No round yet" in page.locator("#loop-round").inner_text()

    # (2) Next round: trained on the 60 tasks' labels (the hold-out left out).
    first = next_round(page, loop, 1)
    assert page.locator("#rounds tr[data-round]").count() == 1
    assert page.locator("svg.loop-curve .point-sampler").count() == 1  # a dot with its interval bar
    assert page.locator("#loop-round [data-role=decision]").inner_text() == first.decision

    # (3) Annotators label 40 more tasks, in the order the round left them; then Next round again.
    vote(campaign, setup["truth"], next_tasks(campaign, 40), setup["raters"])
    second = next_round(page, loop, 2)
    assert second.labels_used > first.labels_used

    rows = page.locator("#rounds tr[data-round]")
    assert rows.count() == 2
    assert [rows.nth(i).get_attribute("data-round") for i in range(2)] == ["2", "1"]
    # The page rounds as Django's floatformat does (0.5455 -> 0.546, where Python's format gives 0.545).
    assert rows.first.locator("[data-role=f1-new]").inner_text() == floatformat(second.holdout["new"]["macro_f1"], 3)
    curve = page.locator("svg.loop-curve")
    assert curve.is_visible()
    assert curve.locator("g.point-sampler line").count() == 2  # each round's point with its bootstrap interval
    points = page.locator("#curve-points tr[data-round]")
    assert points.count() == 2 and "–" in points.first.locator("[data-role=interval]").inner_text()
    assert f"on the same {second.holdout['n']} hold-out items" in page.locator("[data-role=same-items]").inner_text()
    arm = second.holdout["random_arm"]
    assert arm["simulated"] and curve.locator("g.point-random").count() == len(arm["points"]) == 2
    assert f"the random arm trains on {second.labels_used} labels" in page.locator("[data-role=random-arm]").inner_text()
    assert page.locator("svg.loop-quality").is_visible()
    assert page.locator("#loop-live").get_attribute("hx-get") is None  # nothing open: no polling
    shot(page, "loop_curve")
    shot(curve, "loop_curve_chart")
