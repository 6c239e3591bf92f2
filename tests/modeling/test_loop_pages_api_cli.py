"""How a curator drives a learning loop: the campaign page's card, the loop page (settings, Next round,
the live round, the rounds table, the learning curve), the API and ``manage.py loop``.

Alice curates, Bob annotates. Real rounds train the "fluency-encoder" trainer on a small pool (120
sentences, cross-validation off) so the numbers on the page are the ones run_round stored.
"""
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.template.defaultfilters import floatformat
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Campaign
from curation.models import Collection
from modeling.loop import services
from modeling.loop.rounds import run_round
from modeling.models import LearningLoop, LoopRound

from .loop_helpers import make_pool_campaign, next_tasks, vote

pytestmark = pytest.mark.django_db
FAST = {"cv_folds": 0}


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def pool(alice, django_user_model):
    """(campaign, truth, raters): a running fluency campaign over 120 pool sentences, none voted."""
    return make_pool_campaign(alice, django_user_model, n=120)


@pytest.fixture
def loop(pool, alice):
    return services.loop_create(campaign=pool[0], user=alice, config=FAST, batch_size=20)


@pytest.fixture
def api(alice):
    client = Client()
    client.force_login(alice)
    return client


def finished_round(loop, pool, votes: int, user=None) -> LoopRound:
    campaign, truth, raters = pool
    vote(campaign, truth, next_tasks(campaign, votes), raters)
    round_ = run_round(services.round_start(loop, user=user, enqueue=False).pk)
    assert round_.status == LoopRound.Status.DONE, round_.error
    return round_


def row(body: str, number: int) -> str:
    """The round's rows of the rounds table: its numbers, its decision and what it changed."""
    match = re.search(rf'<tr data-round="{number}"[^>]*>(.*?)</tbody>', body.split('id="rounds"')[1], re.DOTALL)
    assert match, f"no row for round {number}"
    return match.group(1)


def cell(row_html: str, role: str) -> str:
    return re.sub(r"<[^>]+>", " ", re.search(rf'data-role="{role}">(.*?)</td>', row_html, re.DOTALL).group(1)).strip()


# --- Reading finished rounds -------------------------------------------------------------------------


def test_two_finished_rounds_read_the_same_on_the_page_the_api_and_the_cli(alice_client, api, loop, pool, alice):
    first = finished_round(loop, pool, 60, alice)
    second = finished_round(loop, pool, 40, alice)
    assert second.labels_used > first.labels_used

    body = alice_client.get(reverse("loop-detail", args=[loop.pk])).content.decode()
    for r in (first, second):
        cells = row(body, r.number)
        # the page rounds as Django's floatformat does (half up on the decimal value: 0.4285 -> 0.429)
        assert cell(cells, "f1-new") == floatformat(r.holdout["new"]["macro_f1"], 3)
        assert cell(cells, "f1-majority") == floatformat(r.holdout["majority"]["macro_f1"], 3)
        assert cell(cells, "labels").startswith(str(r.labels_used))
        assert ("not activated" if not r.activated else "activated") in cells
        assert r.decision.split(":")[0] in cells
    # The curve: one sampler point per round, the latest round's random arm with its error bars, the
    # majority class dashed; and the accuracy / ECE chart.
    curve = body.split('<svg class="loop-curve"')[1].split("</svg>")[0]
    assert curve.count('class="point-sampler"') == 2
    arm = second.holdout["random_arm"]
    assert arm["simulated"] and curve.count('class="point-random"') == len(arm["points"]) >= 2
    assert 'stroke-dasharray="6 4"' in curve and "majority class" in curve
    assert f"{second.labels_used} labels, macro F1" in curve
    assert '<svg class="loop-quality"' in body
    # A round's size is what its version was fitted on: the run's training and validation splits (the run
    # keeps the rest as its own test split).
    splits = second.training_run.data_summary["splits"]
    assert second.labels_used == sum(splits["train"].values()) + sum(splits["val"].values())
    assert f"trains on {second.labels_used} labels drawn from" in body
    assert 'hx-trigger' not in body.split('id="loop-live"')[1].split(">")[0]  # nothing open: no polling

    rounds = api.get(reverse("api-loop-rounds", args=[loop.pk])).json()["results"]
    assert [r["number"] for r in rounds] == [1, 2]
    assert rounds[1]["holdout"]["new"]["macro_f1"] == second.holdout["new"]["macro_f1"]
    assert rounds[1]["version_number"] == second.version.version and rounds[1]["worker_lost"] is False
    one = api.get(reverse("api-loop-round-detail", args=[first.pk])).json()
    assert one["labels_used"] == first.labels_used and one["decision"] == first.decision

    out = StringIO()
    call_command("loop", "show", str(loop.pk), stdout=out)
    text = out.getvalue()
    assert f"{second.holdout['new']['macro_f1']:.3f}" in text and f"{first.holdout['majority']['macro_f1']:.3f}" in text
    for p in arm["points"]:
        assert f"{p['labels']:>5} labels  F1 {p['macro_f1']:.3f}" in text
    assert f"both arms draw on the same {second.labels_used} labels" in text


def test_a_round_whose_random_arm_was_not_simulated_says_why(alice_client, loop):
    # The row as run_round stores it for a trainer without prepared_from_features (the seed's LSTM).
    scores = {"n": 24, "accuracy": 0.75, "macro_f1": 0.71, "ece": 0.08}
    LoopRound.objects.create(loop=loop, number=1, status="done", stage="done", sampler="hybrid", labels_used=90,
                             decision="Activated Fluency classifier v1: hold-out macro F1 0.710.", activated=True,
                             holdout={"n": 24, "minimum": 20, "new": scores,
                                      "majority": {"n": 24, "accuracy": 0.6, "macro_f1": 0.375},
                                      "random_arm": {"simulated": False,
                                                     "why": "the trainer is too slow to retrain per point"}})
    body = alice_client.get(reverse("loop-detail", args=[loop.pk])).content.decode()
    assert "The random arm was not simulated at round 1: the trainer is too slow to retrain per point" in body
    assert 'class="point-random"' not in body and body.count('class="point-sampler"') == 1


# --- Next round --------------------------------------------------------------------------------------


def test_next_round_on_the_page_queues_one_and_a_second_press_is_refused_with_the_message(alice_client, loop):
    url = reverse("loop-next-round", args=[loop.pk])
    response = alice_client.post(url)
    assert response.status_code == 302 and response["Location"] == loop.get_absolute_url()
    round_ = LoopRound.objects.get(loop=loop)
    assert (round_.number, round_.status, round_.trigger) == (1, "queued", "manual")

    refused = alice_client.post(url)
    assert refused.status_code == 409
    body = refused.content.decode()
    assert 'id="round-error"' in body and "Round 1 is still queued: wait for it to end." in body
    assert LoopRound.objects.filter(loop=loop).count() == 1
    # The page shows the queued round and polls while it is open.
    page = alice_client.get(loop.get_absolute_url()).content.decode()
    assert 'data-status="queued"' in page and 'hx-trigger="every 2s"' in page


def test_next_round_through_the_api_is_201_then_409_with_the_code(api, loop):
    url = reverse("api-loop-next-round", args=[loop.pk])
    first = api.post(url)
    assert first.status_code == 201 and first.json()["number"] == 1 and first.json()["status"] == "queued"
    second = api.post(url)
    assert second.status_code == 409
    assert second.json() == {"detail": "Round 1 is still queued: wait for it to end.", "code": "round_running"}
    assert LoopRound.objects.filter(loop=loop).count() == 1


def test_loop_next_runs_the_round_here_printing_each_stage_and_refuses_a_second(loop, pool):
    campaign, truth, raters = pool
    vote(campaign, truth, next_tasks(campaign, 60), raters)
    out = StringIO()
    call_command("loop", "next", str(loop.pk), stdout=out)
    text = out.getvalue()
    for stage in ("aggregating", "training", "evaluating", "rescoring", "prioritising", "done"):
        assert f"round 1: {stage}" in text
    round_ = LoopRound.objects.get(loop=loop)
    assert round_.status == "done" and round_.version is not None and round_.decision in text

    services.round_start(loop, enqueue=False)
    with pytest.raises(CommandError, match="Round 2 is still queued: wait for it to end."):
        call_command("loop", "next", str(loop.pk), stdout=StringIO())
    assert LoopRound.objects.filter(loop=loop).count() == 2


def test_loop_next_queue_sends_the_round_to_the_gpu_queue(loop, monkeypatch, django_capture_on_commit_callbacks):
    from modeling import tasks

    sent = []
    monkeypatch.setattr(tasks.loop_round, "delay", lambda pk: sent.append(pk))
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("loop", "next", str(loop.pk), "--queue", stdout=out)
    round_ = LoopRound.objects.get(loop=loop)
    assert sent == [round_.pk] and round_.status == "queued" and "queued on the gpu queue" in out.getvalue()


# --- Creating a loop ---------------------------------------------------------------------------------


def test_the_campaign_page_starts_a_loop_then_links_to_it(alice_client, pool, alice):
    campaign = pool[0]
    page = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert 'data-role="loop-create"' in page and "Start a learning loop" in page
    response = alice_client.post(reverse("loop-create"), {
        "campaign": campaign.pk, "sampler": "uncertainty", "holdout_source": "random", "holdout_fraction": "0.25",
        "batch_size": "30", "random_share": "0.4", "auto_every_votes": "50"})
    loop = LearningLoop.objects.get(campaign=campaign)
    assert response.status_code == 302 and response["Location"] == loop.get_absolute_url()
    assert (loop.sampler, loop.holdout_fraction, loop.batch_size, loop.random_share, loop.auto_every_votes,
            loop.created_by) == ("uncertainty", 0.25, 30, 0.4, 50, alice)
    assert len(loop.holdout_tasks) == 30  # a quarter of 120
    page = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert 'data-role="loop-create"' not in page and f'href="{loop.get_absolute_url()}"' in page
    assert "No round yet" in alice_client.get(loop.get_absolute_url()).content.decode()
    listed = alice_client.get(reverse("loop-list")).content.decode()
    assert f'data-loop="{loop.pk}"' in listed and campaign.name in listed


@pytest.fixture
def quality_campaign(alice):
    collection = Collection.objects.create(name="photos")
    return Campaign.objects.create(name="good or bad", kind="quality", collection=collection)


def test_bad_input_on_the_campaign_page_is_a_400_with_the_reason_and_makes_no_loop(alice_client, pool,
                                                                                      quality_campaign):
    campaign = pool[0]
    url = reverse("loop-create")
    refused = alice_client.post(url, {"campaign": campaign.pk, "sampler": "psychic"})
    assert refused.status_code == 400 and "Unknown sampler &#x27;psychic&#x27;" in refused.content.decode()
    refused = alice_client.post(url, {"campaign": campaign.pk, "batch_size": "many"})
    assert refused.status_code == 400 and "A whole number" in refused.content.decode()
    refused = alice_client.post(url, {"campaign": campaign.pk, "holdout_fraction": "0.9"})
    assert refused.status_code == 400 and "between 0.05 and 0.5" in refused.content.decode()
    refused = alice_client.post(url, {"campaign": quality_campaign.pk})
    assert refused.status_code == 400 and "learning loops run on fluency campaigns" in refused.content.decode()
    assert alice_client.post(url, {"campaign": "999999"}).status_code == 404
    assert alice_client.post(url, {}).status_code == 404
    assert not LearningLoop.objects.exists()
    # A campaign whose kind trains no model has no card at all.
    assert 'id="learning-loop"' not in alice_client.get(
        reverse("campaign-detail", args=[quality_campaign.pk])).content.decode()


def test_bad_input_through_the_api_is_a_400_with_message_and_code(api, pool, quality_campaign):
    campaign = pool[0]
    url = reverse("api-loop-list")
    bad = api.post(url, {"campaign": campaign.pk, "sampler": "psychic"}, content_type="application/json")
    assert bad.status_code == 400 and "sampler" in bad.json()
    bad = api.post(url, {"campaign": campaign.pk, "batch_size": "many"}, content_type="application/json")
    assert bad.status_code == 400 and "batch_size" in bad.json()
    bad = api.post(url, {"campaign": campaign.pk, "random_share": 3}, content_type="application/json")
    assert bad.status_code == 400 and "share must be between 0 and 1" in bad.json()["detail"] and bad.json()["field"] == "random_share"
    bad = api.post(url, {"campaign": quality_campaign.pk}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "bad_kind" and bad.json()["field"] == "campaign"
    bad = api.post(url, {"campaign": 999999}, content_type="application/json")
    assert bad.status_code == 400 and bad.json() == {"detail": "No campaign #999999.", "code": "no_campaign",
                                                     "field": "campaign"}
    assert api.post(url, {}, content_type="application/json").status_code == 400
    assert api.post(url, "not json", content_type="application/json").status_code == 400
    assert not LearningLoop.objects.exists()

    made = api.post(url, {"campaign": campaign.pk, "sampler": "random", "holdout_fraction": 0.1,
                          "config": FAST}, content_type="application/json")
    assert made.status_code == 201
    assert made.json()["sampler"] == "random" and made.json()["holdout_size"] == 12
    assert made.json()["trainer"] == "fluency-encoder" and made.json()["config"] == FAST
    again = api.post(url, {"campaign": campaign.pk}, content_type="application/json")
    assert again.status_code == 400 and again.json()["code"] == "duplicate"
    assert api.get(url, {"campaign": campaign.pk}).json()["count"] == 1
    assert api.get(url, {"colour": "red"}).status_code == 400


def test_bad_input_on_the_command_line_is_a_clear_command_error(pool, quality_campaign):
    campaign = pool[0]
    with pytest.raises(CommandError, match="Unknown sampler 'psychic'"):
        call_command("loop", "create", "--campaign", str(campaign.pk), "--sampler", "psychic")
    with pytest.raises(CommandError, match="No campaign #999999"):
        call_command("loop", "create", "--campaign", "999999")
    with pytest.raises(CommandError, match="fluency campaigns"):
        call_command("loop", "create", "--campaign", str(quality_campaign.pk))
    with pytest.raises(CommandError, match="invalid float value"):
        call_command("loop", "create", "--campaign", str(campaign.pk), "--holdout-share", "lots")
    with pytest.raises(CommandError, match="No learning loop #999999"):
        call_command("loop", "show", "999999")
    assert not LearningLoop.objects.exists()
    out = StringIO()
    call_command("loop", "create", "--campaign", str(campaign.pk), "--holdout-share", "0.1", "--auto-every", "25",
                 stdout=out)
    loop = LearningLoop.objects.get(campaign=campaign)
    assert loop.auto_every_votes == 25 and f"loop next {loop.pk}" in out.getvalue()
    listed = StringIO()
    call_command("loop", "list", stdout=listed)
    assert f"#{loop.pk}  {campaign.name}" in listed.getvalue() and "no rounds" in listed.getvalue()


# --- Settings, permissions, lost workers ---------------------------------------------------------------


def test_settings_change_on_the_page_and_through_the_api(alice_client, api, loop):
    url = reverse("loop-settings", args=[loop.pk])
    saved = alice_client.post(url, {"sampler": "random", "random_share": "0.5", "batch_size": "10",
                                    "auto_every_votes": "30"})
    assert saved.status_code == 302
    loop.refresh_from_db()
    assert (loop.sampler, loop.random_share, loop.batch_size, loop.auto_every_votes) == ("random", 0.5, 10, 30)
    refused = alice_client.post(url, {"sampler": "hybrid", "random_share": "2"})
    assert refused.status_code == 400 and "share must be between 0 and 1" in refused.content.decode()
    loop.refresh_from_db()
    assert (loop.sampler, loop.random_share) == ("random", 0.5)  # nothing half-saved

    detail = reverse("api-loop-detail", args=[loop.pk])
    patched = api.patch(detail, {"sampler": "uncertainty", "auto_every_votes": 0}, content_type="application/json")
    assert patched.status_code == 200 and patched.json()["sampler"] == "uncertainty"
    loop.refresh_from_db()
    assert (loop.sampler, loop.auto_every_votes, loop.batch_size) == ("uncertainty", 0, 10)
    bad = api.patch(detail, {"batch_size": 0}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "loop_error"
    fixed = api.patch(detail, {"holdout_fraction": 0.3}, content_type="application/json")
    assert fixed.status_code == 400 and fixed.json()["code"] == "not_editable"
    assert api.put(detail, {"sampler": "random"}, content_type="application/json").status_code == 405


def test_annotators_get_403_and_anonymous_users_the_login_page(bob_client, loop, pool):
    page_urls = [reverse("loop-list"), reverse("loop-detail", args=[loop.pk]), reverse("loop-live", args=[loop.pk])]
    posts = [reverse("loop-next-round", args=[loop.pk]), reverse("loop-settings", args=[loop.pk]),
             reverse("loop-create")]
    for url in page_urls:
        assert bob_client.get(url).status_code == 403
        assert Client().get(url).status_code == 302
    for url in posts:
        assert bob_client.post(url, {"campaign": pool[0].pk, "sampler": "random"}).status_code == 403
    for url in (reverse("api-loop-list"), reverse("api-loop-detail", args=[loop.pk]),
                reverse("api-loop-rounds", args=[loop.pk])):
        assert bob_client.get(url).status_code == 403
    assert bob_client.post(reverse("api-loop-next-round", args=[loop.pk])).status_code == 403
    assert bob_client.patch(reverse("api-loop-detail", args=[loop.pk]), {"sampler": "random"},
                            content_type="application/json").status_code == 403
    assert not LoopRound.objects.exists()
    loop.refresh_from_db()
    assert loop.sampler == "hybrid"


def test_a_round_whose_worker_stopped_beating_shows_as_worker_lost(alice_client, api, loop):
    round_ = services.round_start(loop, enqueue=False)
    long_ago = timezone.now() - timedelta(seconds=services.STALE_SECONDS + 60)
    LoopRound.objects.filter(pk=round_.pk).update(status="running", stage="training", heartbeat_at=long_ago,
                                                  started_at=long_ago)
    body = alice_client.get(loop.get_absolute_url()).content.decode()
    round_.refresh_from_db()
    assert round_.status == "failed"  # the page ran the sweep
    assert 'data-status="lost"' in body and "worker lost" in body and "stopped during" in body
    assert api.get(reverse("api-loop-round-detail", args=[round_.pk])).json()["worker_lost"] is True
    # The loop is free again: the next round starts.
    assert alice_client.post(reverse("loop-next-round", args=[loop.pk])).status_code == 302


def test_the_live_block_polls_while_a_round_is_open_and_stops_after(alice_client, loop):
    url = reverse("loop-live", args=[loop.pk])
    assert alice_client.get(url).status_code == 302  # not htmx: the page
    round_ = services.round_start(loop, enqueue=False)
    LoopRound.objects.filter(pk=round_.pk).update(status="running", stage="evaluating", heartbeat_at=timezone.now())
    live = alice_client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert live.lstrip().startswith('<div id="loop-live"')
    assert 'hx-trigger="every 2s"' in live and 'class="stage-current">evaluating' in live
    assert 'class="stage-done">training' in live and "<html" not in live
    LoopRound.objects.filter(pk=round_.pk).update(status="done", stage="done", finished_at=timezone.now())
    done = alice_client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in done and 'data-status="done"' in done
