"""Filter against human on a hand-made set: 8 captions rated GOOD/BAD by three annotators and a
filter run whose decisions cover them."""
import pytest

from annotation.aggregation import aggregate_campaign
from annotation.filter_vs_human import filter_vs_human, suggest_threshold
from annotation.models import Task, Vote
from annotation.routing import worker_for_user
from curation.models import FilterDecision, FilterRun

from .conftest import make_annotators, make_collection

# (filter score, human label); the filter keeps score >= 0.45
ITEMS = [(0.9, "good"), (0.8, "good"), (0.7, "bad"), (0.6, "good"),
         (0.5, "good"), (0.4, "bad"), (0.3, "bad"), (0.2, "good")]


@pytest.fixture
def rated(make_campaign, django_user_model):
    users = make_annotators(django_user_model, 3)
    collection = make_collection(name="fvh", n=len(ITEMS))
    campaign = make_campaign("quality", collection=collection, members=users)
    tasks = list(campaign.tasks.filter(role=Task.Role.REAL).order_by("position", "pk"))
    workers = [worker_for_user(u) for u in users]
    votes = []
    for task, (_, label) in zip(tasks, ITEMS):
        for j, worker in enumerate(workers):
            # two of three agree with the intended label on the first item, the rest are unanimous
            value = label if not (task is tasks[0] and j == 2) else "bad"
            votes.append(Vote(task=task, worker=worker, campaign=campaign, role=Task.Role.REAL,
                              value={"label": value}))
    Vote.objects.bulk_create(votes)
    aggregate_campaign(campaign.pk)
    run = FilterRun.objects.create(collection=collection, status=FilterRun.Status.DONE)
    for task, (score, _) in zip(tasks, ITEMS):
        FilterDecision.objects.create(run=run, step=0, filter_name="informativeness", image_id=task.image_id,
                                      caption_id=task.caption_id, score=score,
                                      outcome="keep" if score >= 0.45 else "drop")
        # a "lower is better" score (e.g. a perplexity) in step 1
        FilterDecision.objects.create(run=run, step=1, filter_name="perplexity", image_id=task.image_id,
                                      caption_id=task.caption_id, score=round(1 - score, 2),
                                      outcome="keep" if 1 - score <= 0.55 else "drop")
    return campaign, run, tasks


def by_filter(rows):
    return {row["filter"]: row for row in rows}


def test_confusion_matrix_precision_recall_and_threshold(rated):
    campaign, run, tasks = rated
    rows = by_filter(filter_vs_human(campaign, precision=0.8))
    assert set(rows) == {"informativeness", "perplexity"}
    info = rows["informativeness"]
    assert (info["run"], info["step"], info["n"], info["positive"]) == (run.pk, 0, 8, "good")
    # keep: 0.9g 0.8g 0.7b 0.6g 0.5g; drop: 0.4b 0.3b 0.2g
    assert info["matrix"] == {"keep": {"bad": 1, "good": 4}, "drop": {"bad": 2, "good": 1}}
    assert info["precision"] == 0.8 and info["recall"] == 0.8
    # keep >= t: 0.9 1/1, 0.8 2/2, 0.7 2/3, 0.6 3/4, 0.5 4/5 (recall 0.8), 0.4 4/6, 0.3 4/7, 0.2 5/8
    suggestion = info["suggestion"]
    assert (suggestion["threshold"], suggestion["direction"]) == (0.5, ">=")
    assert (suggestion["precision"], suggestion["recall"], suggestion["kept"]) == (0.8, 0.8, 5)
    assert suggestion["auc"] == pytest.approx(10 / 15, abs=1e-4)
    strict = by_filter(filter_vs_human(campaign, precision=0.9))["informativeness"]["suggestion"]
    assert (strict["threshold"], strict["precision"], strict["recall"]) == (0.8, 1.0, 0.4)
    # the same scores turned round: the suggestion turns round with them
    lower = rows["perplexity"]["suggestion"]
    assert (lower["threshold"], lower["direction"], lower["recall"]) == (0.5, "<=", 0.8)
    assert rows["perplexity"]["matrix"] == info["matrix"]


def test_overrides_count_and_unreachable_precision_gives_null(rated):
    campaign, run, tasks = rated
    FilterDecision.objects.filter(run=run, step=0, caption_id=tasks[2].caption_id).update(override="drop")
    info = by_filter(filter_vs_human(campaign))["informativeness"]
    assert info["matrix"] == {"keep": {"good": 4}, "drop": {"bad": 3, "good": 1}}
    assert info["precision"] == 1.0 and info["recall"] == 0.8
    # the best-scoring caption is bad: no threshold reaches 0.9 precision
    FilterDecision.objects.filter(run=run, step=0, caption_id=tasks[6].caption_id).update(score=0.95)
    FilterDecision.objects.filter(run=run, step=0, caption_id=tasks[5].caption_id).update(score=0.85)
    FilterDecision.objects.filter(run=run, step=0, caption_id=tasks[2].caption_id).update(score=0.1)
    info = by_filter(filter_vs_human(campaign, precision=0.9))["informativeness"]
    assert info["suggestion"] is None
    # not-applicable decisions are left out
    FilterDecision.objects.filter(run=run, step=1, caption_id=tasks[0].caption_id).update(outcome="na")
    assert by_filter(filter_vs_human(campaign))["perplexity"]["n"] == 7


def test_dawid_skene_label_is_the_human_label(rated):
    campaign, run, tasks = rated
    from annotation.models import Aggregate

    # the human label comes from Dawid-Skene where present: flip it on one task and see it move
    Aggregate.objects.filter(task=tasks[3], method="dawid_skene").update(label="bad")
    info = by_filter(filter_vs_human(campaign))["informativeness"]
    assert info["matrix"]["keep"] == {"bad": 2, "good": 3}
    Aggregate.objects.filter(task=tasks[3], method="dawid_skene").delete()
    info = by_filter(filter_vs_human(campaign))["informativeness"]
    assert info["matrix"]["keep"] == {"bad": 1, "good": 4}  # back to the majority


def test_bad_precision_and_kinds_without_a_positive_label(rated, make_campaign):
    campaign, run, tasks = rated
    with pytest.raises(ValueError):
        filter_vs_human(campaign, precision=1.5)
    write = make_campaign("write", collection=make_collection(name="w", n=2))
    assert filter_vs_human(write) == []


def test_suggest_threshold_directly():
    assert suggest_threshold([0.1, 0.2], [False, False], 0.5) is None
    s = suggest_threshold([0.1, 0.2, 0.3, 0.4], [True, True, False, False], 1.0)
    assert (s["threshold"], s["direction"], s["recall"]) == (0.2, "<=", 1.0)
