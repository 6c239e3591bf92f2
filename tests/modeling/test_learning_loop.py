"""The learning loop end to end on PostgreSQL and Redis with a real Celery worker: three rounds, each
aggregating, retraining, comparing on the hold-out, re-scoring and re-prioritising the open tasks."""
import os
import random
import time

import pytest

from annotation.models import Task
from modeling.loop import services
from modeling.models import LearningLoop, LoopRound, ModelVersion
from tests.conftest import REQUIRE_SERVICES
from tests.modeling.loop_helpers import make_pool_campaign, next_tasks, vote

pytestmark = pytest.mark.worker


@pytest.fixture
def postgres_worker(gpu_worker):
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but DATABASE_URL is not PostgreSQL")
        pytest.skip("the loop's worker test runs on PostgreSQL (DATABASE_URL)")
    return gpu_worker


def _run_round(loop, user, timeout=300) -> LoopRound:
    round_ = services.round_start(loop, user=user)  # enqueued on commit: transactional_db commits at once
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        round_.refresh_from_db()
        if round_.finished:
            return round_
        time.sleep(0.5)
    raise AssertionError(f"round {round_.number} still {round_.status} ({round_.stage}) after {timeout} s")


def _ranks(campaign, task_ids):
    priority = dict(Task.objects.filter(pk__in=task_ids).values_list("pk", "priority"))
    return sorted(task_ids, key=lambda t: (priority[t], t))


def test_three_rounds_reprioritise_the_open_tasks_store_hold_out_metrics_and_keep_a_worse_version_out(
        postgres_worker, alice, django_user_model):
    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=440, seed=11, name="worker fluency")
    loop = services.loop_create(campaign=campaign, user=alice, config={"cv_folds": 3}, min_holdout=15)
    assert len(loop.holdout_tasks) == 88  # a fifth of the tasks, spread through the queue
    # The hold-out the loop drew is seeded by the campaign's pk, which depends on the tests that ran
    # before; whether a round beats the one before on it then did too. Fix it by queue position.
    by_position = list(campaign.tasks.filter(role="real").order_by("position").values_list("pk", flat=True))
    held = set(random.Random("learning-loop-test").sample(by_position, 88))
    LearningLoop.objects.filter(pk=loop.pk).update(holdout_tasks=sorted(held))
    loop.refresh_from_db()
    # Round 1 may activate only on at least 50 labelled hold-out items (modeling.verdicts.MIN_ITEMS): label the
    # campaign in its order until 55 of them are (about 275 labels; the hold-out is not interleaved before round 1).
    queue = next_tasks(campaign, 440)
    first_batch = next(k for k in range(len(queue)) if len(held & set(queue[:k])) >= 55)
    vote(campaign, truth, queue[:first_batch], raters)
    watched = sorted(set(next_tasks(campaign, 200)) - held)[:150]  # open tasks, none labelled yet

    first = _run_round(loop, alice)
    assert first.status == "done", first.error
    assert first.activated and "Activated" in first.decision, (first.decision, first.holdout)
    assert first.holdout["n"] >= 50 and first.holdout["verdict"]["activatable"]
    assert first.holdout["new"]["macro_f1"] >= first.holdout["verdict"]["best_macro_f1"] + 0.05
    assert first.version.metrics["verdict"]["basis"] == "holdout"  # the loop's judgement is the version's one verdict
    done = set(Task.objects.filter(campaign=campaign, status="done").values_list("pk", flat=True))
    summary = first.training_run.data_summary
    assert sum(summary["labels"].values()) == first_batch - len(held & done)  # every label but the hold-out's
    assert first.labels_used == sum(summary["splits"]["train"].values()) + sum(summary["splits"]["val"].values())
    assert first.changes["rescored"] == Task.objects.filter(campaign=campaign, status="open").count()
    order_after_first = _ranks(campaign, watched)
    scores_after_first = dict(Task.objects.filter(pk__in=watched).values_list("pk", "model_score"))
    assert all(score is not None for score in scores_after_first.values())

    vote(campaign, truth, next_tasks(campaign, 80), raters)
    still_open = [t for t in watched if Task.objects.get(pk=t).status == "open"]
    second = _run_round(loop, alice)
    assert second.status == "done", second.error
    assert second.labels_used > first.labels_used
    # The model changed, so did the scores and the order in which the same open tasks are served.
    scores_after_second = dict(Task.objects.filter(pk__in=still_open).values_list("pk", "model_score"))
    assert any(abs(scores_after_second[t] - scores_after_first[t]) > 0.01 for t in still_open)
    assert _ranks(campaign, still_open) != [t for t in order_after_first if t in still_open]
    assert second.holdout["new"]["n"] == second.holdout["n"] and "previous" in second.holdout
    assert [p["n"] for p in second.holdout["curve"]] == [second.holdout["n"]] * 2  # both versions, the same items
    active_before_third = ModelVersion.objects.get(kind="fluency", active=True)

    # A round whose training is crippled (one epoch at a vanishing learning rate) trains a worse model: it is
    # registered, compared on the hold-out, and not activated.
    LearningLoop.objects.filter(pk=loop.pk).update(config={"cv_folds": 0, "epochs": 1, "lr": 1e-7})
    loop.refresh_from_db()
    third = _run_round(loop, alice)
    assert third.status == "done", third.error
    assert not third.activated and third.decision.startswith("Not activated")
    assert ModelVersion.objects.get(kind="fluency", active=True) == active_before_third
    assert third.version.pk != active_before_third.pk
    assert [r.number for r in loop.rounds.all()] == [1, 2, 3]
    assert all(r.holdout.get("new", {}).get("macro_f1") is not None for r in loop.rounds.all())
