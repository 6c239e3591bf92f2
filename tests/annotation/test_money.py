"""Money: fee models, commitments against the budget, idempotent tokens and the summary figures."""
import pytest
from django.utils import timezone

from annotation.models import Assignment, LedgerEntry, Vote, Worker
from annotation.providers import money
from annotation.providers.base import ProviderError

pytestmark = pytest.mark.django_db


def test_mturk_fee_is_20_percent_and_40_percent_for_large_hits():
    assert money.fee_cents("mturk", 100, "reward", 1) == 20
    assert money.fee_cents("mturk", 100, "reward", 9) == 20
    assert money.fee_cents("mturk", 100, "reward", 10) == 40
    assert money.fee_cents("mturk", 100, "bonus", 10) == 20  # bonuses stay at 20%
    assert money.fee_cents("mturk", 2, "reward", 1) == 1  # at least a cent
    assert money.fee_cents("mturk", 0, "reward", 1) == 0
    assert money.fee_cents("inhouse", 500, "reward", 1) == 0


def test_linkout_fee_rate_from_setting_and_campaign(make_campaign, settings):
    settings.LINKOUT_FEE_RATE = 0.33
    assert money.fee_cents("linkout", 1000, "reward") == 330
    campaign = make_campaign("fluency", backend="linkout")
    campaign.provider_config = {"fee_rate": 0.25}
    assert money.fee_cents("linkout", 1000, "reward", campaign=campaign) == 250
    assert money.fee_cents("linkout", 1000, "bonus", campaign=campaign) == 250
    campaign.provider_config = {"fee_rate": "lots"}
    with pytest.raises(ProviderError):
        money.fee_cents("linkout", 1000, "reward", campaign=campaign)


def test_commit_refuses_past_the_budget_and_writes_nothing(make_campaign):
    campaign = make_campaign("fluency")
    campaign.backend, campaign.budget_cents = "mturk", 1000
    campaign.save()
    entry = money.commit(campaign, "mturk", "reward", 500, "hit-1")  # 500 + 100 fee
    assert entry.state == "committed" and money.fee_entry(entry).amount_cents == 100
    with pytest.raises(ProviderError) as err:
        money.commit(campaign, "mturk", "reward", 400, "hit-2")  # 400 + 80 > 400 left
    assert err.value.code == "over_budget" and "4.00" in err.value.message
    assert not LedgerEntry.objects.filter(token__startswith="hit-2").exists()
    money.commit(campaign, "mturk", "reward", 300, "hit-3")  # 300 + 60 fits
    # a budget of 0 allows no money at all for a paid provider
    campaign.budget_cents = 0
    campaign.save()
    with pytest.raises(ProviderError):
        money.commit(campaign, "mturk", "bonus", 1, "b-1")


def test_the_same_token_twice_is_one_entry(make_campaign):
    campaign = make_campaign("fluency")
    campaign.budget_cents = 10_000
    campaign.save()
    a = money.commit(campaign, "mturk", "bonus", 200, "bonus-a")
    b = money.commit(campaign, "mturk", "bonus", 200, "bonus-a")
    assert a.pk == b.pk and LedgerEntry.objects.count() == 2  # the bonus and its fee
    money.mark_paid(a)
    money.mark_paid(a)
    assert LedgerEntry.objects.filter(state="paid").count() == 2
    assert money.summary(campaign)["spent"] == 240
    money.cancel(a)  # a paid entry stays paid
    assert LedgerEntry.objects.get(pk=a.pk).state == "paid"


def test_cancel_releases_a_commitment(make_campaign):
    campaign = make_campaign("fluency")
    campaign.budget_cents = 600
    campaign.save()
    entry = money.commit(campaign, "mturk", "reward", 500, "r1")
    with pytest.raises(ProviderError):
        money.commit(campaign, "mturk", "reward", 50, "r2")
    money.cancel(entry)
    money.commit(campaign, "mturk", "reward", 50, "r2")
    assert money.summary(campaign)["committed"] == 60


def test_draw_moves_a_reward_out_of_the_launch_commitment(make_campaign, settings):
    settings.LINKOUT_FEE_RATE = 0.5
    campaign = make_campaign("fluency", backend="linkout")
    campaign.budget_cents = 3000
    campaign.save()
    pool = money.commit(campaign, "linkout", "reward", 2000, "launch")  # 2000 + 1000 fee = the whole budget
    worker = Worker.objects.create(provider="linkout", external_id="P1")
    assignment = Assignment.objects.create(campaign=campaign, worker=worker)
    paid = money.mark_paid(money.draw(pool, kind="reward", amount_cents=500, token="reward-1",
                                      assignment=assignment, worker=worker))
    again = money.draw(pool, kind="reward", amount_cents=500, token="reward-1")
    assert again.pk == paid.pk
    s = money.summary(campaign)
    assert (s["spent"], s["committed"], s["remaining"]) == (750, 2250, 0)


def test_summary_on_a_hand_made_ledger(make_campaign):
    campaign = make_campaign("fluency", votes_per_item=1)
    campaign.backend, campaign.budget_cents = "mturk", 10_000
    campaign.save()
    w1 = Worker.objects.create(provider="mturk", external_id="A1")
    w2 = Worker.objects.create(provider="mturk", external_id="A2")
    ok = Assignment.objects.create(campaign=campaign, worker=w1, state="approved")
    bad = Assignment.objects.create(campaign=campaign, worker=w2, state="rejected")
    tasks = list(campaign.tasks.all()[:5])
    for task in tasks[:3]:
        Vote.objects.create(task=task, worker=w1, campaign=campaign, assignment=ok, value={"label": "fluent"})
    Vote.objects.create(task=tasks[3], worker=w1, campaign=campaign, assignment=ok, value={"label": "fluent"},
                        quarantined=True)
    for task in tasks[:2]:
        Vote.objects.create(task=task, worker=w2, campaign=campaign, assignment=bad, value={"label": "fluent"})
    now = timezone.now()
    rows = [("reward", "paid", 300), ("fee", "paid", 60), ("bonus", "paid", 50), ("fee", "paid", 10),
            ("reward", "committed", 1000), ("fee", "committed", 200), ("reward", "cancelled", 999)]
    for i, (kind, state, amount) in enumerate(rows):
        LedgerEntry.objects.create(campaign=campaign, provider="mturk", kind=kind, state=state, amount_cents=amount,
                                   token=f"t{i}", paid_at=now if state == "paid" else None)
    s = money.summary(campaign)
    assert s["spent"] == 420 and s["committed"] == 1200 and s["remaining"] == 10_000 - 1620
    assert (s["rewards"], s["bonuses"], s["fees"]) == (300, 50, 70)
    assert s["accepted_votes"] == 3 and s["accepted_captions"] == 0
    assert s["cost_per_vote"] == 140.0 and s["cost_per_caption"] is None
