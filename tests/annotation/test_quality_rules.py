"""Quality rules for every provider: an in-house annotator who fails the gold items is blocked
automatically, as external workers are; a blocked worker's payments are held (never committed or
paid) until a curator unblocks them; the MTurk sync never approves or pays an assignment of a
worker it blocks, in the same sync or an earlier one.

Bob and Erin annotate in-house; Alice curates; Mallory is the spammer on MTurk and Grace the
careful MTurk worker."""
import io
import random

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation import quality
from annotation.models import Assignment, Campaign, LedgerEntry, Membership, ProviderJob, Task, Vote, Worker
from annotation.providers import controls, money
from annotation.providers.base import ProviderError, get_provider
from annotation.providers.sync import sync_campaign
from annotation.routing import RoutingError, block_worker, next_task, submit_vote, worker_for_user
from annotation.services import set_gold
from annotation.tasks_providers import provider_publish

from .conftest import make_annotators
from .test_mturk_sync import finish, open_hit

pytestmark = pytest.mark.django_db


def answer(campaign, user, n, *, gold_value, real_value="good"):
    """The user takes n tasks through routing; gold items get ``gold_value``."""
    worker = worker_for_user(user)
    for _ in range(n):
        served = next_task(Campaign.objects.get(pk=campaign.pk), worker)
        assert served.task is not None, served.message
        value = gold_value if served.task.role == Task.Role.GOLD else real_value
        submit_vote(campaign, worker, served.task.pk, value, seconds=3.0)


@pytest.fixture
def gold_campaign(make_campaign, bob, django_user_model, monkeypatch):
    (erin,) = make_annotators(django_user_model, 1, prefix="erin")
    campaign = make_campaign("quality", members=[bob, erin], gold_rate=0.5)
    for task in campaign.tasks.order_by("-position")[:4]:
        set_gold(task, role=Task.Role.GOLD, value="bad")
    controls.update_controls(campaign, {"review": {"block_below_gold_accuracy": 0.6, "block_min_gold": 3}})
    monkeypatch.setattr(random, "random", lambda: 0.0)  # every claim serves a gold item while there is one
    campaign.erin = erin
    return campaign


def test_an_in_house_annotator_below_the_gold_threshold_is_blocked_automatically(gold_campaign, bob):
    campaign, erin = gold_campaign, gold_campaign.erin
    answer(campaign, bob, 2, gold_value="good")  # 2 gold items wrong: not enough seen yet
    assert quality.enforce_gold_rules(campaign) == []
    answer(campaign, bob, 1, gold_value="good")
    answer(campaign, erin, 3, gold_value="bad")  # Erin gets them right
    blocked = quality.enforce_gold_rules(campaign)
    assert blocked == [worker_for_user(bob)]
    bob_member = Membership.objects.get(campaign=campaign, worker__user=bob)
    assert bob_member.blocked and bob_member.gold_seen == 3 and bob_member.gold_correct == 0
    assert "0 of 3 check items right (at least 60% needed)" in bob_member.blocked_reason
    assert not Membership.objects.get(campaign=campaign, worker__user=erin).blocked
    assert quality.enforce_gold_rules(campaign) == []  # once
    # blocked: no more work, and his votes leave the counts
    with pytest.raises(RoutingError) as refused:
        next_task(campaign, worker_for_user(bob))
    assert refused.value.code == "blocked"
    counted = sum(campaign.tasks.filter(role="real").values_list("votes_count", flat=True))
    assert counted == Vote.objects.filter(campaign=campaign, role="real", worker__user=erin).count()


def test_the_rule_runs_with_the_aggregation_that_votes_schedule(gold_campaign, bob, eager_celery, settings):
    from annotation.tasks import aggregate_campaign

    settings.ANNOTATION_AGGREGATE_DEBOUNCE = 0
    answer(gold_campaign, bob, 3, gold_value="good")
    aggregate_campaign.delay(gold_campaign.pk, mode="changes")  # what each vote schedules
    assert Membership.objects.get(campaign=gold_campaign, worker__user=bob).blocked


def test_the_rule_runs_when_a_curator_recomputes_on_the_dashboard(gold_campaign, bob, alice_client, eager_celery):
    answer(gold_campaign, bob, 3, gold_value="good")
    response = alice_client.post(reverse("campaign-aggregate", args=[gold_campaign.pk]), follow=True)
    assert "Blocked on gold accuracy: bob" in response.content.decode()
    assert Membership.objects.get(campaign=gold_campaign, worker__user=bob).blocked


def test_the_rule_runs_from_the_api_and_the_command(gold_campaign, bob, alice, eager_celery):
    from rest_framework.test import APIClient

    answer(gold_campaign, bob, 3, gold_value="good")
    out = io.StringIO()
    call_command("campaign", "aggregate", str(gold_campaign.pk), stdout=out)
    assert "Blocked bob on gold accuracy." in out.getvalue()
    erin = gold_campaign.erin
    answer(gold_campaign, erin, 3, gold_value="good")  # Erin misses them too, later

    api = APIClient()
    api.force_authenticate(alice)
    assert api.post(f"/api/campaigns/{gold_campaign.pk}/aggregate/").status_code == 202
    assert Membership.objects.get(campaign=gold_campaign, worker__user=erin).blocked


def test_without_a_threshold_nobody_is_blocked(make_campaign, bob, monkeypatch):
    campaign = make_campaign("quality", members=[bob], gold_rate=0.5)
    for task in campaign.tasks.order_by("-position")[:3]:
        set_gold(task, role=Task.Role.GOLD, value="bad")
    monkeypatch.setattr(random, "random", lambda: 0.0)
    answer(campaign, bob, 3, gold_value="good")
    assert quality.enforce_gold_rules(campaign) == []


def test_a_blocked_workers_payments_are_held_until_unblocked(gold_campaign, bob):
    answer(gold_campaign, bob, 3, gold_value="good")
    Campaign.objects.filter(pk=gold_campaign.pk).update(budget_cents=1000)
    [worker] = quality.enforce_gold_rules(gold_campaign)
    with pytest.raises(ProviderError) as refused:
        money.commit(gold_campaign, "linkout", LedgerEntry.Kind.BONUS, 50, "bonus:bob:1", worker=worker)
    assert refused.value.code == "worker_blocked" and "held" in refused.value.message
    assert not LedgerEntry.objects.exists()
    block_worker(gold_campaign, worker, blocked=False)
    assert money.commit(gold_campaign, "linkout", LedgerEntry.Kind.BONUS, 50, "bonus:bob:1", worker=worker).pk


@pytest.fixture
def linkout_study(make_campaign, alice_client, settings):
    settings.LINKOUT_FEE_RATE = 0.5
    campaign = make_campaign("fluency", backend="linkout", status="draft", reward_cents=100, budget_cents=5000,
                             votes_per_item=2)
    controls.update_controls(campaign, {"places": 3, "provider_config": {
        "completion_code": "C0DE1234", "completion_url": "https://app.prolific.com/submissions/complete?cc={code}",
        "review": {"block_below_gold_accuracy": 0.5, "block_min_gold": 2}}})
    assert alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"])).status_code == 302
    campaign.refresh_from_db()
    return campaign


def test_a_link_out_participant_blocked_on_gold_is_not_paid_on_approval(linkout_study, alice_client):
    client = Client()
    client.get(reverse("linkout-start", args=[linkout_study.public_token]), {"PROLIFIC_PID": "spammer01"})
    a = Assignment.objects.get(campaign=linkout_study, worker__external_id="spammer01")
    Assignment.objects.filter(pk=a.pk).update(state="submitted", submitted_at=timezone.now(), confirmed=True)
    # the participant answered the gold items wrongly (the counters the vote path keeps)
    Membership.objects.filter(campaign=linkout_study, worker=a.worker).update(gold_seen=4, gold_correct=1)
    assert quality.enforce_gold_rules(linkout_study) == [a.worker]
    response = alice_client.post(reverse("provider-assignment", args=[linkout_study.pk, a.pk, "approve"]))
    assert response.status_code == 409 and "payment is held" in response.content.decode()
    a.refresh_from_db()
    assert a.state == "submitted"
    assert not LedgerEntry.objects.filter(worker=a.worker).exists()
    assert money.summary(linkout_study)["spent"] == 0
    # the curator unblocks him: the approval pays
    block_worker(linkout_study, a.worker, blocked=False)
    assert alice_client.post(reverse("provider-assignment", args=[linkout_study.pk, a.pk, "approve"])).status_code == 302
    assert LedgerEntry.objects.filter(worker=a.worker, kind="reward", state="paid").count() == 1


# --- MTurk -------------------------------------------------------------------------------------------


@pytest.fixture
def turk_campaign(make_campaign):
    c = make_campaign("fluency", status="draft")
    keep = list(c.tasks.order_by("position").values_list("pk", flat=True)[:5])
    c.tasks.exclude(pk__in=keep).delete()
    gold_task = c.tasks.order_by("position").last()
    set_gold(gold_task, role=Task.Role.GOLD, value="not_fluent")
    c.tasks.filter(role="real").update(votes_required=1)
    Campaign.objects.filter(pk=c.pk).update(backend="mturk", reward_cents=10, budget_cents=1000, votes_per_item=1)
    c.refresh_from_db()
    controls.update_controls(c, {"provider_config": {"tasks_per_assignment": 2, "max_assignments": 2}, "review": {
        "min_gold_accuracy": 0.5, "block_below_gold_accuracy": 0.5, "block_min_gold": 1, "bonus_cents": 5}})
    return c


def work_on(campaign, assignment, n, *, value="fluent"):
    campaign = Campaign.objects.get(pk=campaign.pk)
    for _ in range(n):
        served = next_task(campaign, assignment.worker)
        assert served.task is not None, served.message
        submit_vote(campaign, assignment.worker, served.task.pk, {"label": value}, seconds=5)


def wrong_gold(campaign, assignment):
    """A wrong answer on the gold item, recorded on this assignment (as the work page records it)."""
    gold = campaign.tasks.get(role=Task.Role.GOLD)
    Vote.objects.create(task=gold, worker=assignment.worker, campaign=campaign, assignment=assignment, role="gold",
                        value={"label": "fluent"}, correct=False, seconds=4)


def test_the_mturk_sync_never_approves_or_pays_a_worker_it_blocks(turk_campaign, fake, eager_celery):
    assert provider_publish.delay(turk_campaign.pk).get()["state"] == "done"
    hit1, hit2 = ProviderJob.objects.filter(campaign=turk_campaign).order_by("pk").values_list("external_id",
                                                                                                 flat=True)
    # Mallory's first assignment fails the gold item; her second one looks fine on its own
    spam1 = open_hit(turk_campaign, fake, hit1, "AMALLORY")
    work_on(turk_campaign, spam1, 1)
    wrong_gold(turk_campaign, spam1)
    spam2 = open_hit(turk_campaign, fake, hit2, "AMALLORY")
    work_on(turk_campaign, spam2, 1)
    grace = open_hit(turk_campaign, fake, hit1, "AGRACE")
    work_on(turk_campaign, grace, 1)
    for a in (spam1, spam2, grace):
        finish(fake, a)

    report = sync_campaign(turk_campaign)
    assert report["rejected"] == 1 and report["blocked"] == 1 and report["approved"] == 1, report
    assert report["held_blocked"] == 1, report
    assert fake.blocks.get("AMALLORY")
    states = {a.pk: Assignment.objects.get(pk=a.pk).state for a in (spam1, spam2, grace)}
    assert states == {spam1.pk: "rejected", spam2.pk: "submitted", grace.pk: "approved"}
    assert fake.assignments[spam2.provider_assignment_id]["AssignmentStatus"] == "Submitted"
    mallory = Worker.objects.get(external_id="AMALLORY")
    assert not LedgerEntry.objects.filter(worker=mallory).exists()
    assert [b["WorkerId"] for b in fake.bonuses] == ["AGRACE"]

    # a later sync holds her assignment again; nothing is paid to her
    report = sync_campaign(turk_campaign)
    assert report.get("approved", 0) == 0 and report["held_blocked"] == 1, report
    assert fake.count("ApproveAssignment") == 1
    assert not LedgerEntry.objects.filter(worker=mallory).exists()
    assert fake.paid_cents()["rewards"] == 10
    # nor can a curator's approve button pay her while she is blocked
    with pytest.raises(ProviderError) as refused:
        get_provider("mturk").approve(Assignment.objects.select_related("campaign", "worker").get(pk=spam2.pk))
    assert refused.value.code == "worker_blocked" and fake.count("ApproveAssignment") == 1


def test_the_sync_holds_a_spammers_earlier_assignment_too(turk_campaign, fake, eager_celery):
    """The assignment that looks fine comes first; the one that blocks her comes after it."""
    provider_publish.delay(turk_campaign.pk).get()
    hit1, hit2 = ProviderJob.objects.filter(campaign=turk_campaign).order_by("pk").values_list("external_id",
                                                                                                 flat=True)
    first = open_hit(turk_campaign, fake, hit1, "AMALLORY")
    work_on(turk_campaign, first, 1)
    second = open_hit(turk_campaign, fake, hit2, "AMALLORY")
    work_on(turk_campaign, second, 1)
    wrong_gold(turk_campaign, second)
    finish(fake, first), finish(fake, second)
    report = sync_campaign(turk_campaign)
    assert report.get("approved", 0) == 0 and report["held_blocked"] == 1 and report["blocked"] == 1, report
    assert fake.count("ApproveAssignment") == 0 and fake.paid_cents()["total"] == 0
    assert Assignment.objects.get(pk=first.pk).state == "submitted"


def test_the_sync_applies_the_campaign_wide_gold_rule(turk_campaign, fake, eager_celery):
    """Gold answers spread over assignments: the membership's figures block her, before any approval."""
    provider_publish.delay(turk_campaign.pk).get()
    hit1 = ProviderJob.objects.filter(campaign=turk_campaign).order_by("pk").first().external_id
    a = open_hit(turk_campaign, fake, hit1, "AMALLORY")
    work_on(turk_campaign, a, 1)
    finish(fake, a)
    Membership.objects.filter(campaign=turk_campaign, worker=a.worker).update(gold_seen=3, gold_correct=0)
    report = sync_campaign(turk_campaign)
    assert report["blocked_gold"] == 1 and report["held_blocked"] == 1 and report.get("approved", 0) == 0, report
    assert fake.blocks.get("AMALLORY") and fake.count("ApproveAssignment") == 0
