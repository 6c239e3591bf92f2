"""Aggregation that follows the changed votes: Carol's incremental pass recomputes only the tasks
whose votes changed and lands where a full recomputation lands; the model-based methods wait for
their bounded schedule; ties are reported as ties; each worker gets an alpha with the rest."""
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from annotation import tasks as annotation_tasks
from annotation.aggregation import aggregate_campaign, aggregate_changes, models_wait, validate_tie_break
from annotation.models import Aggregate, Campaign, Membership, Vote

from .test_aggregation import B, G, cast, nominal_alpha, setup

PER_TASK = ("majority", "mean", "consistent", "rover")
FIGURES = ("n_votes", "n_votes_used", "n_votes_excluded", "n_tasks", "n_tasks_aggregated", "vote_distribution",
           "seed_figures", "ties")


def backdate(campaign, seconds=90):
    """Votes cast 90 s ago (still within the 120 s edit window), so that only the votes a test
    casts or edits later count as new."""
    then = timezone.now() - timedelta(seconds=seconds)
    Vote.objects.filter(campaign=campaign).update(created_at=then, updated_at=then)


def per_task_rows(campaign):
    return {(a.task_id, a.part, a.method): (a.label, a.confidence, a.n_votes, a.details)
            for a in Aggregate.objects.filter(task__campaign=campaign, method__in=PER_TASK)}


def figures(stats):
    out = {k: stats.get(k) for k in FIGURES}
    out["label_distribution"] = {m: d for m, d in stats["label_distribution"].items() if m in PER_TASK}
    likert = out["seed_figures"].get("likert") or {}
    for dim in likert.values():  # sums of floats in another order: equal to the rounding
        dim["mean"], dim["std"] = round(dim["mean"], 3), round(dim["std"], 3)
    return out


def stamps(campaign, tasks):
    return {a.pk: a.updated_at for a in Aggregate.objects.filter(task__in=tasks, method__in=PER_TASK)}


@pytest.mark.parametrize("kind, first, edited", [
    ("quality", [[G, G, B], [G, B, B], [G, G, G], [B, B, B], [G, G, None], [None, None, None]], G),
    ("fluency", [[{"label": "fluent"}] * 3, [{"label": "fluent"}, {"label": "difficult"}, {"label": "fluent"}],
                 [{"label": "not_fluent"}] * 3, [{"label": "fluent"}, {"label": "not_fluent"}, None],
                 [{"label": "fluent"}, None, None], [None, None, None]], {"label": "not_fluent"}),
    ("informativeness_score", [[{"score": 20}, {"score": 80}, {"score": 60}], [{"score": 10}] * 3,
                               [{"score": 90}, {"score": 95}, None], [{"score": 50}, {"score": 49}, {"score": 51}],
                               [{"score": 5}, None, None], [None, None, None]], {"score": 77}),
])
def test_carol_s_incremental_pass_touches_only_the_changed_tasks_and_equals_a_full_pass(
        make_campaign, django_user_model, kind, first, edited):
    campaign, tasks, workers = setup(make_campaign, django_user_model, kind, 6, 3, prefix=f"inc-{kind}-")
    cast(campaign, tasks, workers, first)
    backdate(campaign)
    aggregate_campaign(campaign.pk)
    untouched = stamps(campaign, tasks[2:4])

    # New votes on tasks 4 and 5, one vote edited on task 0 (the page's undo within the window).
    Vote.objects.create(task=tasks[4], worker=workers[2], campaign=campaign, value=first[0][0])
    Vote.objects.create(task=tasks[5], worker=workers[0], campaign=campaign, value=edited)
    vote = Vote.objects.get(task=tasks[0], worker=workers[2])
    vote.value = edited
    vote.save()

    stats = aggregate_changes(campaign.pk)
    assert stamps(campaign, tasks[2:4]) == untouched  # tasks 2 and 3 were not rewritten
    changed = {a.task_id for a in Aggregate.objects.filter(task__campaign=campaign, method__in=PER_TASK)
               if a.updated_at > max(untouched.values())}
    assert changed == {tasks[0].pk, tasks[4].pk, tasks[5].pk}
    incremental_rows, incremental_figures = per_task_rows(campaign), figures(stats)

    full = aggregate_campaign(campaign.pk)
    assert per_task_rows(campaign) == incremental_rows
    assert figures(full) == incremental_figures
    assert full["n_votes"] == sum(v is not None for row in first for v in row) + 2


def test_blocking_a_worker_recomputes_the_tasks_they_voted_on(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 4, 3, prefix="blk")
    cast(campaign, tasks, workers, [[G, G, B], [G, B, B], [B, B, B], [G, G, None]])
    backdate(campaign)
    aggregate_campaign(campaign.pk)
    Membership.objects.filter(campaign=campaign, worker=workers[2]).update(blocked=True)

    stats = aggregate_changes(campaign.pk)
    assert stats["n_votes_excluded"] == 3 and stats["n_votes_used"] == 8
    assert Aggregate.objects.get(task=tasks[1], method="majority").details["tie"] is True
    rows = per_task_rows(campaign)
    full = aggregate_campaign(campaign.pk)
    assert per_task_rows(campaign) == rows and figures(full) == figures(stats)


def test_a_pass_with_nothing_new_writes_nothing(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 2, 2, prefix="idle")
    cast(campaign, tasks, workers, [[G, G], [B, B]])
    backdate(campaign)
    aggregate_campaign(campaign.pk)
    before = Campaign.objects.get(pk=campaign.pk).stats_updated_at
    aggregate_changes(campaign.pk)
    assert Campaign.objects.get(pk=campaign.pk).stats_updated_at == before


def test_the_models_wait_for_their_bound_then_run(make_campaign, django_user_model, settings, monkeypatch):
    settings.ANNOTATION_MODELS_MIN_INTERVAL = 300
    settings.ANNOTATION_MODELS_AFTER_VOTES = 3
    settings.ANNOTATION_MODELS_MAX_DELAY = 1800
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 3, 3, prefix="due")
    cast(campaign, tasks, workers, [[G, G, G], [B, B, None], [None, None, None]])
    backdate(campaign)
    aggregate_campaign(campaign.pk)
    ds_before = Aggregate.objects.get(task=tasks[1], method="dawid_skene")
    queued = []
    monkeypatch.setattr(annotation_tasks.aggregate_campaign, "apply_async",
                        lambda args=None, kwargs=None, countdown=None, **kw: queued.append((kwargs, countdown)))
    cache.delete(f"annotation:aggregate-models:{campaign.pk}")

    Vote.objects.create(task=tasks[1], worker=workers[2], campaign=campaign, value=G)
    annotation_tasks.aggregate_campaign(campaign.pk, mode="changes")
    stats = Campaign.objects.get(pk=campaign.pk).stats
    assert stats["incremental"]["pending_votes"] == 1
    # One new vote, models run a moment ago: not before the max delay (1800 s).
    assert 1790 < models_wait(stats) <= 1800
    assert queued and queued[-1][0] == {"mode": "due"} and queued[-1][1] > 1790
    annotation_tasks.aggregate_campaign(campaign.pk, mode="due")  # a check that fires early does nothing
    assert Aggregate.objects.get(pk=ds_before.pk).updated_at == ds_before.updated_at
    assert Aggregate.objects.get(task=tasks[1], method="majority").details["tie"] is False  # 2 bad, 1 good

    # Three votes changed and the interval passed: due now.
    for w in workers:
        Vote.objects.create(task=tasks[2], worker=w, campaign=campaign, value=B)
    aggregate_changes(campaign.pk)
    later = timezone.now() + timedelta(seconds=301)
    assert models_wait(Campaign.objects.get(pk=campaign.pk).stats, now=later) == 0.0
    settings.ANNOTATION_MODELS_MIN_INTERVAL = 0
    annotation_tasks.aggregate_campaign(campaign.pk, mode="due")
    assert Aggregate.objects.get(task=tasks[2], method="dawid_skene").label == "bad"
    stats = Campaign.objects.get(pk=campaign.pk).stats
    assert stats["incremental"]["pending_votes"] == 0 and models_wait(stats) is None
    cache.delete(f"annotation:aggregate-models:{campaign.pk}")


def test_a_split_vote_is_reported_as_a_tie_unless_a_rule_breaks_it(make_campaign, django_user_model, alice_client):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 3, 2, prefix="tie")
    cast(campaign, tasks, workers, [[G, B], [B, G], [G, G]])
    stats = aggregate_campaign(campaign.pk)
    split = Aggregate.objects.get(task=tasks[0], method="majority")
    assert split.label is None and split.confidence == 0.5
    assert split.details["tie"] is True and split.details["tied"] == ["bad", "good"]
    assert split.details["tie_break"] == "report"
    assert stats["ties"] == {"rule": "report", "majority": 2}
    assert stats["label_distribution"]["majority"] == {"good": 1, "null": 2}
    page = alice_client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "Majority ties: 2" in page and "<code>report</code>" in page

    Campaign.objects.filter(pk=campaign.pk).update(provider_config={"tie_break": "prefer:bad"})
    stats = aggregate_campaign(campaign.pk)
    assert Aggregate.objects.get(task=tasks[0], method="majority").label == "bad"
    assert stats["ties"] == {"rule": "prefer:bad", "majority": 2}  # still counted as ties

    Campaign.objects.filter(pk=campaign.pk).update(provider_config={"tie_break": "coin"})
    stats = aggregate_campaign(campaign.pk)
    assert Aggregate.objects.get(task=tasks[0], method="majority").label is None
    assert any("not a rule" in n for n in stats["notes"])
    with pytest.raises(ValueError, match="report, random or prefer"):
        validate_tie_break("coin")


def test_each_worker_gets_an_alpha_with_the_rest(make_campaign, django_user_model, alice_client):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 4, 3, prefix="alpha")
    cast(campaign, tasks, workers, [[G, G, B], [G, G, B], [B, B, G], [B, B, G]])
    stats = aggregate_campaign(campaign.pk)
    rows = {r["worker"]: r for r in stats["workers"]}
    agreeing = nominal_alpha([["g", "g"]] * 2 + [["b", "b"]] * 2 + [["g", "b"]] * 4)
    contrary = nominal_alpha([["b", "g"]] * 8)
    assert rows[workers[0].pk]["alpha"] == pytest.approx(agreeing, abs=1e-4) == pytest.approx(0.0625, abs=1e-4)
    assert rows[workers[2].pk]["alpha"] == pytest.approx(contrary, abs=1e-4) == pytest.approx(-0.875, abs=1e-4)
    assert rows[workers[0].pk]["alpha_pairs"] == 8

    page = alice_client.get(f"/campaigns/{campaign.pk}/workers").content.decode()
    assert "α with the rest" in page and "-0.875" in page and "0.063" in page
    api = alice_client.get(f"/api/campaigns/{campaign.pk}/agreement/").json()
    assert {w["worker"]: w["alpha"] for w in api["workers"]}[workers[2].pk] == pytest.approx(-0.875, abs=1e-4)
    members = alice_client.get(f"/api/campaigns/{campaign.pk}/workers/").json()
    members = members.get("results", members) if isinstance(members, dict) else members
    assert {w["worker"]: w["alpha"] for w in members}[workers[0].pk] == pytest.approx(0.0625, abs=1e-4)
