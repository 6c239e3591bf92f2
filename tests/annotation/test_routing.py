"""Routing and votes through the service layer: reservations, replays, expiry, blocking,
dynamic overlap, training and qualification."""
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import routing
from annotation.models import Membership, Reservation, Task, Vote, VoteEdit
from annotation.routing import RoutingError, next_task, submit_vote, worker_for_user
from annotation.services import set_gold

from .conftest import make_annotators


def test_each_worker_votes_once_per_task_and_tasks_close(make_campaign, django_user_model):
    users = make_annotators(django_user_model, 3)
    campaign = make_campaign("fluency", members=users, votes_per_item=2)
    workers = [worker_for_user(u) for u in users]
    total = 0
    for worker in workers:
        while True:
            served = next_task(campaign, worker)
            if served.task is None:
                assert served.stage == "done"
                break
            submit_vote(campaign, worker, served.task.pk, "fluent", seconds=1.5)
            total += 1
    assert total == 12 * 2
    for task in campaign.tasks.all():
        assert task.status == Task.Status.DONE
        assert task.votes_count == 2 and task.reserved_count == 0
        assert len(set(task.votes.values_list("worker_id", flat=True))) == 2


def test_reload_gets_the_same_task_and_replay_gives_one_vote(make_campaign, bob, bob_worker):
    campaign = make_campaign("quality", members=[bob])
    first = next_task(campaign, bob_worker)
    again = next_task(campaign, bob_worker)
    assert first.task.pk == again.task.pk
    one = submit_vote(campaign, bob_worker, first.task.pk, "good")
    two = submit_vote(campaign, bob_worker, first.task.pk, "bad")
    assert one.created and not two.created and two.vote.pk == one.vote.pk
    assert Vote.objects.filter(task=first.task).count() == 1
    assert Vote.objects.get(task=first.task).value == {"label": "good"}


def test_bad_votes_are_refused_with_reasons(make_campaign, bob, bob_worker, django_user_model):
    campaign = make_campaign("fluency", members=[bob], reservation_seconds=60)
    served = next_task(campaign, bob_worker)
    with pytest.raises(RoutingError) as exc:
        submit_vote(campaign, bob_worker, served.task.pk, "brilliant")
    assert exc.value.status == 400 and "fluent" in exc.value.message
    other = campaign.tasks.exclude(pk=served.task.pk).first()
    with pytest.raises(RoutingError) as exc:
        submit_vote(campaign, bob_worker, other.pk, "fluent")
    assert exc.value.status == 409
    # an expired reservation still holds its slot: the late vote is taken (test_late_votes.py has the rest)
    Reservation.objects.filter(task=served.task).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert submit_vote(campaign, bob_worker, served.task.pk, "fluent").created
    task = Task.objects.get(pk=served.task.pk)
    assert (task.reserved_count, task.votes_count) == (0, 1)
    (stranger,) = make_annotators(django_user_model, 1, prefix="stranger")
    with pytest.raises(RoutingError) as exc:
        next_task(campaign, worker_for_user(stranger))
    assert exc.value.status == 404


def test_expired_reservations_return_to_the_pool(make_campaign, django_user_model):
    a, b = make_annotators(django_user_model, 2)
    campaign = make_campaign("quality", members=[a, b], votes_per_item=1, collection=None)
    wa, wb = worker_for_user(a), worker_for_user(b)
    Task.objects.filter(campaign=campaign).exclude(pk=campaign.tasks.first().pk).delete()
    served = next_task(campaign, wa)
    assert next_task(campaign, wb).task is None  # the single task is reserved by a
    Reservation.objects.filter(task=served.task).update(expires_at=timezone.now() - timedelta(seconds=1))
    again = next_task(campaign, wb)
    assert again.task.pk == served.task.pk


def test_blocking_excludes_votes_and_reopens_tasks(make_campaign, django_user_model):
    a, b = make_annotators(django_user_model, 2)
    campaign = make_campaign("quality", members=[a, b], votes_per_item=1)
    wa = worker_for_user(a)
    served = next_task(campaign, wa)
    submit_vote(campaign, wa, served.task.pk, "good")
    assert Task.objects.get(pk=served.task.pk).status == Task.Status.DONE
    assert routing.block_worker(campaign, wa, reason="spam") == 1
    task = Task.objects.get(pk=served.task.pk)
    assert task.status == Task.Status.OPEN and task.votes_count == 0
    with pytest.raises(RoutingError) as exc:
        next_task(campaign, wa)
    assert exc.value.status == 403


def test_dynamic_overlap_stops_on_agreement_and_extends_on_doubt(make_campaign, django_user_model):
    users = make_annotators(django_user_model, 5)
    campaign = make_campaign("quality", members=users, votes_per_item=2, dynamic_overlap=True,
                             max_votes_per_item=4, confidence_threshold=0.75)
    workers = [worker_for_user(u) for u in users]
    task = campaign.tasks.first()
    Task.objects.filter(campaign=campaign).exclude(pk=task.pk).delete()
    answers = ["good", "bad", "good", "good", "good"]
    for worker, answer in zip(workers, answers):
        served = next_task(campaign, worker)
        if served.task is None:
            break
        submit_vote(campaign, worker, served.task.pk, answer)
    task.refresh_from_db()
    # good/bad disagree at 2 -> 3 votes (2/3 < 0.75) -> 4 votes (3/4 >= 0.75): done at 4, not 5
    assert task.status == Task.Status.DONE and task.votes_count == 4 and task.votes_required == 4


def test_training_then_qualification_then_work(make_campaign, bob, bob_worker):
    campaign = make_campaign("fluency", members=[bob], qualification_pass_mark=0.5)
    tasks = list(campaign.tasks.order_by("position"))
    set_gold(tasks[0], role="training", value="fluent", feedback="A complete, grammatical sentence.")
    set_gold(tasks[1], role="qualification", value="fluent")
    set_gold(tasks[2], role="qualification", value="not_fluent")
    served = next_task(campaign, bob_worker)
    assert served.stage == "training" and served.task.pk == tasks[0].pk
    result = submit_vote(campaign, bob_worker, served.task.pk, "not_fluent")
    assert result.feedback["correct"] is False and result.feedback["expected"] == {"label": "fluent"}
    served = next_task(campaign, bob_worker)
    assert served.stage == "qualification"
    submit_vote(campaign, bob_worker, served.task.pk, "fluent")
    served = next_task(campaign, bob_worker)
    submit_vote(campaign, bob_worker, served.task.pk, "fluent")  # wrong on the second
    served = next_task(campaign, bob_worker)
    assert served.stage == "work" and served.task.role == Task.Role.REAL
    membership = Membership.objects.get(campaign=campaign, worker=bob_worker)
    assert membership.qualified is True and membership.qualification_score == 0.5


def test_failing_qualification_gets_no_work(make_campaign, bob, bob_worker):
    campaign = make_campaign("fluency", members=[bob], qualification_pass_mark=1.0)
    (q,) = list(campaign.tasks.order_by("position"))[:1]
    set_gold(q, role="qualification", value="fluent")
    served = next_task(campaign, bob_worker)
    submit_vote(campaign, bob_worker, served.task.pk, "difficult")
    served = next_task(campaign, bob_worker)
    assert served.task is None and served.stage == "failed"


def test_edit_within_window_keeps_audit_trail(make_campaign, bob, bob_worker):
    campaign = make_campaign("fluency", members=[bob], edit_window_seconds=60)
    served = next_task(campaign, bob_worker)
    vote = submit_vote(campaign, bob_worker, served.task.pk, "fluent").vote
    assert routing.last_editable_vote(campaign, bob_worker).pk == vote.pk
    routing.edit_vote(campaign, bob_worker, vote.pk, "not_fluent")
    assert Vote.objects.get(pk=vote.pk).value == {"label": "not_fluent"}
    assert VoteEdit.objects.get(vote=vote).old_value == {"label": "fluent"}
    Vote.objects.filter(pk=vote.pk).update(created_at=timezone.now() - timedelta(seconds=120))
    with pytest.raises(RoutingError) as exc:
        routing.edit_vote(campaign, bob_worker, vote.pk, "fluent")
    assert exc.value.status == 409


def test_written_captions_are_crowd_captions_fed_to_rating(make_campaign, bob, bob_worker, alice):
    rate = make_campaign("quality", members=[bob], name="rate written")
    write = make_campaign("write", members=[bob], rate_campaign=rate, collection=rate.collection,
                          name="write captions")
    served = next_task(write, bob_worker)
    text = "A dog runs along the beach at sunset."
    result = submit_vote(write, bob_worker, served.task.pk, {"text": text})
    caption = result.vote.caption
    assert caption.origin == "crowd" and caption.text == text
    assert caption.metadata["worker"] == bob_worker.pk
    assert rate.tasks.filter(caption=caption).exists()
    with pytest.raises(RoutingError) as exc:
        served = next_task(write, bob_worker)
        submit_vote(write, bob_worker, served.task.pk, {"text": "x" * 301})
    assert "too long" in exc.value.message
