"""Aggregation as a Celery task: the debounce of schedule_aggregation, and a real worker consuming
"annotation.aggregate_campaign" from Redis and writing the campaign's stats."""

import pytest
from django.core.cache import cache

from annotation import tasks as annotation_tasks
from annotation.models import Aggregate, Campaign, Task, Vote
from annotation.routing import worker_for_user

from .conftest import make_annotators, make_collection


def _key(campaign_id):
    return f"annotation:aggregate:{campaign_id}"


def test_schedule_aggregation_is_debounced(make_campaign, settings, monkeypatch,
                                           django_capture_on_commit_callbacks):
    campaign = make_campaign("quality", collection=make_collection(name="debounce", n=2))
    settings.ANNOTATION_AGGREGATE_DEBOUNCE = 30
    cache.delete(_key(campaign.pk))  # a Redis cache outlives test databases whose ids repeat
    sent = []
    monkeypatch.setattr(annotation_tasks.aggregate_campaign, "apply_async",
                        lambda args=None, countdown=None, **kw: sent.append((args, countdown)))
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            assert annotation_tasks.schedule_aggregation(campaign.pk) is True
            assert annotation_tasks.schedule_aggregation(campaign.pk) is False  # within the window
            assert annotation_tasks.schedule_aggregation(campaign.pk) is False
        assert len(callbacks) == 1
        expected_countdown = 0 if settings.CELERY_TASK_ALWAYS_EAGER else 30
        assert sent == [([campaign.pk], expected_countdown)]
        cache.delete(_key(campaign.pk))  # the window has passed
        with django_capture_on_commit_callbacks(execute=True):
            assert annotation_tasks.schedule_aggregation(campaign.pk) is True
        assert len(sent) == 2
    finally:
        cache.delete(_key(campaign.pk))


def test_eager_task_runs_the_aggregation(make_campaign, django_user_model, settings):
    users = make_annotators(django_user_model, 2)
    campaign = make_campaign("quality", collection=make_collection(name="eager", n=2), members=users)
    task = campaign.tasks.filter(role=Task.Role.REAL).first()
    for user in users:
        Vote.objects.create(task=task, worker=worker_for_user(user), campaign=campaign, value={"label": "good"})
    stats = annotation_tasks.aggregate_campaign.apply(args=[campaign.pk]).get()
    assert stats["n_votes"] == 2
    assert Aggregate.objects.get(task=task, method="majority").label == "good"


@pytest.mark.worker
def test_a_real_worker_aggregates_a_campaign_from_redis(redis_worker, alice, django_user_model):
    from annotation import services

    users = make_annotators(django_user_model, 3)
    collection = make_collection(name="celery aggregation", n=3)
    campaign = services.campaign_create(name="celery agg", kind="fluency", selection={"collection": collection.pk},
                                        user=alice, members=users, status="running")
    tasks = list(campaign.tasks.filter(role=Task.Role.REAL).order_by("position", "pk"))
    workers = [worker_for_user(u) for u in users]
    for task, label in zip(tasks, ["fluent", "not_fluent", "fluent"]):
        for worker in workers:
            Vote.objects.create(task=task, worker=worker, campaign=campaign, value={"label": label})
    result = annotation_tasks.aggregate_campaign.apply_async(args=[campaign.pk])
    stats = result.get(timeout=120)
    assert stats["n_votes"] == 9
    campaign = Campaign.objects.get(pk=campaign.pk)
    assert campaign.stats["seed_figures"]["fluency_consistent"] == {"fluent": 2, "not_fluent": 1, "ignored": 0}
    assert campaign.stats_updated_at is not None
    assert Aggregate.objects.get(task=tasks[1], method="dawid_skene").label == "not_fluent"
