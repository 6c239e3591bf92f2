"""Votes and aggregation at the same time, on PostgreSQL, for 30 seconds (issue 23).

Six annotators vote as fast as they can, each on their own connection, while another thread
recomputes the campaign's aggregates over and over, as the Celery worker does while votes arrive.
The two used to deadlock: the vote locked its membership row before the foreign-key check of its
vote insert took the campaign's key share, while aggregation held the campaign ``FOR UPDATE`` and
waited for membership rows (see the lock order in ``annotation.routing``). No thread may see an
error, every acknowledged vote is stored and nothing else is, no worker votes twice on a task, and
the counters on the task and membership rows agree with the vote rows; then the items left half
voted are finished and every item ends with exactly its required votes.

The race needs a vote to be between two of its own steps at the moment aggregation locks the
campaign, which is rare on an idle machine; the first test builds that moment on purpose, so a
lock order that can deadlock fails it every time.
"""
import threading
import time
from collections import Counter

import pytest
from django.db import connection, transaction
from django.db.models import Count

from annotation.aggregation import aggregate_campaign
from annotation.models import Aggregate, Campaign, Membership, Reservation, Task, Vote
from annotation.routing import next_task, release, submit_vote, worker_for_user
from curation.models import Caption, Collection, Image

from ..conftest import REQUIRE_SERVICES
from .conftest import TEXTS, make_annotators

pytestmark = pytest.mark.django_db(transaction=True)

VOTERS = 6
SECONDS = 30
ITEMS = 3000  # more than six annotators finish in 30 s on two cores, so votes never stop early


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        message = "votes racing aggregation need PostgreSQL's row locks: set DATABASE_URL=postgres://..."
        if REQUIRE_SERVICES:
            pytest.fail(message)
        pytest.skip(message)


def _big_collection(n: int) -> Collection:
    collection = Collection.objects.create(name=f"race {n}", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    images = Image.objects.bulk_create([
        Image(collection=collection, sha256=f"{i:064x}", width=640, height=480, format="JPEG",
              external_id=f"race-{i}", status=Image.Status.READY) for i in range(n)])
    Caption.objects.bulk_create([Caption(image=image, text=TEXTS[i % len(TEXTS)], origin=Caption.Origin.ALT_TEXT,
                                         source="s0") for i, image in enumerate(images)])
    return collection


def _in_threads(targets):
    """Run each (function, args) in its own thread with its own connection; errors collected."""
    errors, lock = [], threading.Lock()

    def wrapped(function, *args):
        try:
            function(*args)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            with lock:
                errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=wrapped, args=(function, *args)) for function, *args in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=SECONDS + 240)
    assert not any(thread.is_alive() for thread in threads), "a thread hung (a lock never released?)"
    return errors


def _counters_agree(campaign):
    """Counters on the task and membership rows equal the vote and reservation rows."""
    votes = Counter(Vote.objects.filter(campaign=campaign).values_list("task_id", flat=True))
    live = Counter(Reservation.objects.filter(campaign=campaign).values_list("task_id", flat=True))
    for task in Task.objects.filter(campaign=campaign):
        assert task.votes_count == votes[task.pk] <= task.votes_required, task
        assert task.reserved_count == live[task.pk], task
        assert (task.status == Task.Status.DONE) == (votes[task.pk] == task.votes_required), task
    by_worker = dict(Vote.objects.filter(campaign=campaign).values("worker_id").annotate(n=Count("pk"))
                     .values_list("worker_id", "n"))
    for member in Membership.objects.filter(campaign=campaign):
        assert member.votes == by_worker.get(member.worker_id, 0), member


def test_votes_and_aggregation_run_together_for_thirty_seconds_without_an_error(make_campaign, django_user_model,
                                                                               settings):
    # GLAD and MACE off: a quicker round of aggregation writes more often, the moments that race
    settings.ANNOTATION_SLOW_METHODS_MAX_VOTES = 0
    users = make_annotators(django_user_model, VOTERS, prefix="racer")
    campaign = make_campaign("quality", collection=_big_collection(ITEMS), members=users, votes_per_item=3)
    acknowledged, replays, aggregations, lock = [], Counter(), Counter(), threading.Lock()
    deadline = time.monotonic() + SECONDS

    def vote(user, until):
        camp = Campaign.objects.get(pk=campaign.pk)
        worker = worker_for_user(user)
        n = 0
        while until is None or time.monotonic() < until:
            served = next_task(camp, worker)
            if served.task is None:
                return
            label = "good" if (served.task.pk + worker.pk) % 3 else "bad"
            result = submit_vote(camp, worker, served.task.pk, label, seconds=0.5)
            assert result.created
            n += 1
            if n % 7 == 0:  # a replay now and then: the same vote back, nothing stored
                again = submit_vote(camp, worker, served.task.pk, "bad", seconds=0.5)
                assert not again.created and again.vote.pk == result.vote.pk
                with lock:
                    replays["seen"] += 1
            with lock:
                acknowledged.append(result.vote.pk)
        held = Reservation.objects.filter(campaign=camp, worker=worker).values_list("task_id", flat=True)
        for task_id in list(held):
            release(camp, worker, task_id)

    def aggregate():
        while time.monotonic() < deadline:
            aggregate_campaign(campaign.pk)
            aggregations["runs"] += 1
        print(f"{len(acknowledged)} votes and {aggregations['runs']} aggregations in {SECONDS} s")

    errors = _in_threads([(vote, user, deadline) for user in users] + [(aggregate,)])
    assert not errors, errors
    assert aggregations["runs"] >= 2 and replays["seen"] >= 1
    stored = list(Vote.objects.filter(campaign=campaign).values_list("pk", "task_id", "worker_id"))
    assert sorted(acknowledged) == sorted(pk for pk, _, _ in stored), "acknowledged != stored"
    pairs = [(task, worker) for _, task, worker in stored]
    assert len(pairs) == len(set(pairs)), "a worker voted twice on a task"
    _counters_agree(campaign)
    done = Task.objects.filter(campaign=campaign, status=Task.Status.DONE).count()
    assert done >= 10, f"only {done} items were finished in {SECONDS} s"

    # Finish the items left half voted (the untouched ones leave the campaign), then all are exact.
    Task.objects.filter(campaign=campaign, votes_count=0, reserved_count=0).delete()
    errors = _in_threads([(vote, user, None) for user in users])
    assert not errors, errors
    _counters_agree(campaign)
    tasks = Task.objects.filter(campaign=campaign)
    assert tasks.count() >= done
    assert all(task.votes_count == task.votes_required == 3 and task.status == Task.Status.DONE for task in tasks)
    per_task = Counter(Vote.objects.filter(campaign=campaign).values_list("task_id", flat=True))
    assert set(per_task.values()) == {3}
    stored = Vote.objects.filter(campaign=campaign).values_list("pk", flat=True)
    assert sorted(acknowledged) == sorted(stored), "acknowledged != stored"


def _wait_until_waiting(n: int, seconds: float = 15.0) -> None:
    """Until n other backends of this database wait for a lock (asked from the caller's own
    connection, inside its transaction, where the activity view is re-read each time)."""
    end = time.monotonic() + seconds
    with connection.cursor() as cursor:
        while time.monotonic() < end:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
            if cursor.fetchone()[0] >= n:
                return
            time.sleep(0.05)
        cursor.execute("SELECT pid, state, wait_event_type, wait_event, left(query, 120) FROM pg_stat_activity "
                       "WHERE datname = current_database()")
        activity = cursor.fetchall()
    raise AssertionError(f"fewer than {n} requests came to wait for the campaign's lock: {activity}")


def test_a_vote_or_claim_waiting_for_aggregation_holds_nothing_aggregation_needs(make_campaign, django_user_model):
    """Aggregation holds the campaign row while an annotator's vote and another's claim come in;
    then it writes aggregates of every task (its inserts take a key share on each task row) and
    the reliability of every member. The vote and the claim must be waiting before they hold
    anything of that (the lock order in annotation.routing), so all three finish, no deadlock."""
    voter, claimer = make_annotators(django_user_model, 2, prefix="order")
    campaign = make_campaign("quality", members=[voter, claimer], votes_per_item=3)
    w_vote, w_claim = worker_for_user(voter), worker_for_user(claimer)
    served = next_task(campaign, w_vote)
    first = next_task(campaign, w_claim)  # the claimer's assignment and stages are settled already
    submit_vote(campaign, w_claim, first.task.pk, "good")
    holding, results, errors = threading.Event(), {}, []

    def aggregation_like():
        with transaction.atomic():
            Campaign.objects.select_for_update().get(pk=campaign.pk)  # as aggregation._write does today
            holding.set()
            _wait_until_waiting(2)
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '20s'")
            Aggregate.objects.bulk_create([Aggregate(task=task, part="", method="majority", label="good", n_votes=1)
                                           for task in Task.objects.filter(campaign=campaign)])
            Membership.objects.filter(campaign=campaign).update(reliability=0.5)
            Campaign.objects.filter(pk=campaign.pk).update(stats={"computed": True})

    def vote():
        holding.wait(10)
        results["vote"] = submit_vote(Campaign.objects.get(pk=campaign.pk), w_vote, served.task.pk, "good")

    def claim():
        holding.wait(10)
        results["claim"] = next_task(Campaign.objects.get(pk=campaign.pk), w_claim)

    errors = _in_threads([(aggregation_like,), (vote,), (claim,)])
    assert not errors, errors
    assert results["vote"].created and results["claim"].task is not None
    assert Campaign.objects.get(pk=campaign.pk).stats == {"computed": True}
    _counters_agree(campaign)
