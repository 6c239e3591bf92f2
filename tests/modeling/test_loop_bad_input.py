"""Bad input to the learning loop gets a clear answer and loses nothing: too few labels, one class only, a
hold-out too small to compare, a changed encoder, a round started twice, a worker killed mid-round."""
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import services as campaign_services
from annotation.models import Task
from modeling import encoders
from modeling.loop import services
from modeling.loop.rounds import run_round
from modeling.models import LearningLoop, LoopRound, ModelVersion, TrainingRun
from tests.modeling.loop_helpers import make_pool_campaign, next_tasks, vote


@pytest.fixture
def pool(db, alice, django_user_model):
    return make_pool_campaign(alice, django_user_model, n=120, seed=21, name="bad fluency")


def _priorities(campaign):
    return dict(Task.objects.filter(campaign=campaign).values_list("pk", "priority"))


def test_a_loop_needs_a_campaign_whose_labels_train_a_model_and_a_hold_out(pool, alice):
    campaign, _, _ = pool
    quality = campaign_services.campaign_create(name="quality", kind="quality",
                                                selection={"collection": campaign.collection_id}, user=alice)
    with pytest.raises(services.LoopError) as wrong_kind:
        services.loop_create(campaign=quality)
    assert wrong_kind.value.code == "bad_kind"
    with pytest.raises(services.LoopError) as no_gold:
        services.loop_create(campaign=campaign, holdout_source="gold")
    assert no_gold.value.code == "empty_holdout" and "gold items" in str(no_gold.value)
    with pytest.raises(services.LoopError) as sampler:
        services.loop_create(campaign=campaign, sampler="greedy")
    assert sampler.value.field == "sampler"
    services.loop_create(campaign=campaign)
    with pytest.raises(services.LoopError) as twice:
        services.loop_create(campaign=campaign)
    assert twice.value.code == "duplicate"
    assert LearningLoop.objects.count() == 1


def test_a_second_round_while_one_is_open_is_refused_not_doubled(pool, alice):
    campaign, _, _ = pool
    loop = services.loop_create(campaign=campaign)
    first = services.round_start(loop, user=alice, enqueue=False)
    with pytest.raises(services.LoopError) as refused:
        services.round_start(loop, user=alice, enqueue=False)
    assert refused.value.code == "round_running" and "Round 1 is still queued" in str(refused.value)
    assert list(loop.rounds.values_list("number", flat=True)) == [first.number]


def test_too_few_labels_fail_the_round_with_the_counts_and_leave_the_priorities_alone(pool, alice):
    campaign, truth, raters = pool
    loop = services.loop_create(campaign=campaign)
    # Nine training items and one hold-out item, whichever tasks the seeded hold-out drew (it depends
    # on the campaign's id, so the first ten tasks served may hold none of it).
    held = set(loop.holdout_tasks)
    served = next_tasks(campaign, 120)
    vote(campaign, truth, [t for t in served if t not in held][:9] + [t for t in served if t in held][:1], raters)
    before = _priorities(campaign)
    round_ = run_round(services.round_start(loop, user=alice, enqueue=False).pk)
    assert round_.status == "failed"
    assert "Too few fluency labels" in round_.error and "; 1 kept out as the hold-out" in round_.error
    assert _priorities(campaign) == before
    assert services.round_start(loop, user=alice, enqueue=False).number == 2  # the next one may start


def test_one_class_only_fails_the_round_clearly(pool, alice):
    campaign, truth, raters = pool
    loop = services.loop_create(campaign=campaign)
    vote(campaign, {t: 1 for t in truth}, next_tasks(campaign, 60), raters)
    round_ = run_round(services.round_start(loop, user=alice, enqueue=False).pk)
    assert round_.status == "failed" and "0 not fluent" in round_.error


def test_a_hold_out_too_small_to_compare_keeps_the_active_version_and_says_why(pool, alice):
    campaign, truth, raters = pool
    loop = services.loop_create(campaign=campaign, min_holdout=50, config={"cv_folds": 0})
    vote(campaign, truth, next_tasks(campaign, 70), raters)
    round_ = run_round(services.round_start(loop, user=alice, enqueue=False).pk)
    assert round_.status == "done", round_.error
    assert not round_.activated and not ModelVersion.objects.filter(active=True).exists()
    assert "comparing versions needs 50" in round_.decision
    # The open tasks were still re-scored with the new model, so the next batch is chosen by it.
    assert round_.changes["rescored"] == Task.objects.filter(campaign=campaign, status="open").count()


def test_a_changed_encoder_fails_the_round_with_the_file_named(pool, alice, tmp_path):
    campaign, truth, raters = pool
    broken = tmp_path / "enc"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"changed")
    encoders.register(encoders.EncoderSpec(name="broken-test", directory=broken, licence="MIT",
                                           files={"model.safetensors": "0" * 64}))
    loop = services.loop_create(campaign=campaign, config={"encoder": "broken-test"})
    vote(campaign, truth, next_tasks(campaign, 60), raters)
    round_ = run_round(services.round_start(loop, user=alice, enqueue=False).pk)
    assert round_.status == "failed"
    assert "broken-test" in round_.error and "model.safetensors" in round_.error


def test_a_round_whose_worker_died_is_marked_failed_within_two_minutes_and_tasks_keep_their_order(pool, alice):
    campaign, _, _ = pool
    loop = services.loop_create(campaign=campaign)
    before = _priorities(campaign)
    round_ = services.round_start(loop, user=alice, enqueue=False)
    LoopRound.objects.filter(pk=round_.pk).update(status="running", stage="training",
                                                  heartbeat_at=timezone.now() - timedelta(seconds=90))
    assert services.sweep_stale() == 0  # 90 s without a beat: still alive
    LoopRound.objects.filter(pk=round_.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=121))
    assert services.sweep_stale() == 1
    round_.refresh_from_db()
    assert round_.status == "failed" and "worker stopped during 'training'" in round_.error
    assert _priorities(campaign) == before
    assert services.round_start(loop, user=alice, enqueue=False).number == 2


def test_a_redelivered_round_reuses_its_finished_training_run(pool, alice):
    campaign, truth, raters = pool
    loop = services.loop_create(campaign=campaign, config={"cv_folds": 0}, min_holdout=5)
    vote(campaign, truth, next_tasks(campaign, 80), raters)
    round_ = run_round(services.round_start(loop, user=alice, enqueue=False).pk)
    assert round_.status == "done", round_.error
    runs = TrainingRun.objects.count()
    # The worker died after training, the message came back: the round runs again from the start.
    LoopRound.objects.filter(pk=round_.pk).update(status="running", stage="rescoring")
    again = run_round(round_.pk)
    assert again.status == "done" and TrainingRun.objects.count() == runs


def test_a_round_no_worker_takes_is_given_up_after_an_hour_and_a_broker_that_refuses_fails_it_at_once(
        pool, alice, monkeypatch, django_capture_on_commit_callbacks):
    from modeling import tasks

    campaign, _, _ = pool
    loop = services.loop_create(campaign=campaign)
    waiting = services.round_start(loop, user=alice, enqueue=False)
    LoopRound.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(minutes=59))
    assert services.sweep_stale() == 0
    LoopRound.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(minutes=61))
    assert services.sweep_stale() == 1
    waiting.refresh_from_db()
    assert waiting.status == "failed" and "No worker took the round" in waiting.error

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(tasks.loop_round, "delay", refuse)
    with django_capture_on_commit_callbacks(execute=True):
        refused = services.round_start(loop, user=alice)
    refused.refresh_from_db()
    assert refused.status == "failed" and "could not be queued" in refused.error and "is the broker up" in refused.error
