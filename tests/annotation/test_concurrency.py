"""Routing under real concurrency on PostgreSQL: many annotators voting at once on one campaign.

Each thread is a different annotator with its own database connection; they start together at a
barrier and work until nothing is left. At the end every task has exactly its required votes, no
worker voted twice on a task, every acknowledged vote is stored and nothing else is, and the
counters on the task rows agree with the vote and reservation rows.
"""
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count
from django.urls import include, path, reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Campaign, Membership, Reservation, Task, Vote
from annotation.routing import RoutingError, next_task, submit_vote, worker_for_user

from ..conftest import REQUIRE_SERVICES
from .conftest import make_annotators, make_collection

urlpatterns = [path("api/", include("annotation.web.annotator.api")), path("", include("curation.urls"))]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

THREADS = 16


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        message = ("concurrency tests need PostgreSQL (row locks with SKIP LOCKED): "
                   "set DATABASE_URL=postgres://...")
        if REQUIRE_SERVICES:
            pytest.fail(message)
        pytest.skip(message)
    with connection.cursor() as cursor:  # a shared server may have too few left for THREADS connections
        cursor.execute("SELECT setting::int - (SELECT count(*) FROM pg_stat_activity) FROM pg_settings "
                       "WHERE name = 'max_connections'")
        free = cursor.fetchone()[0]
    if free < THREADS + 4:
        pytest.skip(f"the PostgreSQL server has {free} free connections and these tests open {THREADS + 4}: "
                    "raise max_connections or stop other clients")


def _campaign(make_campaign, users, n_tasks=40, votes=3, **fields):
    collection = make_collection(name=f"concurrency {n_tasks}", n=n_tasks)
    return make_campaign("quality", collection=collection, members=users, votes_per_item=votes, **fields)


def _run_threads(target, args_per_thread):
    """Start every thread at once (a barrier); each closes its own connection; errors re-raised."""
    barrier = threading.Barrier(len(args_per_thread))
    errors = []

    def wrapped(*args):
        try:
            barrier.wait(timeout=30)
            target(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrapped, args=args) for args in args_per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    assert not errors, errors


def _check_exact(campaign, acknowledged):
    """Every task exactly full, no duplicates, acknowledged == stored, counters == rows."""
    votes = Vote.objects.filter(campaign=campaign)
    stored = set(votes.values_list("pk", flat=True))
    assert len(acknowledged) == len(set(acknowledged)), "a vote id was acknowledged twice"
    assert set(acknowledged) == stored, (len(acknowledged), len(stored))
    pairs = list(votes.values_list("task_id", "worker_id"))
    assert len(pairs) == len(set(pairs)), "a worker voted twice on a task"
    per_task = Counter(task_id for task_id, _ in pairs)
    live = Counter(Reservation.objects.filter(campaign=campaign).values_list("task_id", flat=True))
    tasks = list(Task.objects.filter(campaign=campaign))
    for task in tasks:
        assert per_task[task.pk] == task.votes_required == task.votes_count, task
        assert task.reserved_count == live[task.pk] == 0, task
        assert task.status == Task.Status.DONE
    assert sum(per_task.values()) == sum(t.votes_required for t in tasks)
    # each member's vote counter agrees with their rows
    by_worker = dict(votes.values("worker_id").annotate(n=Count("pk")).values_list("worker_id", "n"))
    for m in Membership.objects.filter(campaign=campaign):
        assert m.votes == by_worker.get(m.worker_id, 0)


def test_sixteen_workers_through_the_service_layer(make_campaign, django_user_model):
    users = make_annotators(django_user_model, THREADS)
    campaign = _campaign(make_campaign, users, n_tasks=60, votes=3)
    acknowledged, lock = [], threading.Lock()

    def work(user):
        camp = Campaign.objects.get(pk=campaign.pk)
        worker = worker_for_user(user)
        while True:
            served = next_task(camp, worker)
            if served.task is None:
                assert served.stage == "done"
                return
            result = submit_vote(camp, worker, served.task.pk, "good" if served.task.pk % 2 else "bad", seconds=0.1)
            assert result.created
            with lock:
                acknowledged.append(result.vote.pk)

    _run_threads(work, [(u,) for u in users])
    _check_exact(campaign, acknowledged)
    assert len(acknowledged) == 60 * 3


def test_sixteen_workers_through_the_http_api(make_campaign, django_user_model):
    users = make_annotators(django_user_model, THREADS, prefix="http")
    campaign = _campaign(make_campaign, users, n_tasks=40, votes=4)
    tokens = {u.pk: Token.objects.create(user=u).key for u in users}
    acknowledged, lock = [], threading.Lock()
    next_url = reverse("api-campaign-next", args=[campaign.pk])

    def work(user):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {tokens[user.pk]}")
        while True:
            resp = client.post(next_url, format="json")
            assert resp.status_code == 200, resp.content
            body = resp.json()
            if body["task"] is None:
                assert body["stage"] == "done"
                return
            url = reverse("api-task-vote", args=[campaign.pk, body["task"]["id"]])
            resp = client.post(url, {"value": "good", "seconds": 0.2}, format="json")
            assert resp.status_code == 201, resp.content
            # a double submit of the same vote is acknowledged with the same id, not stored twice
            replay = client.post(url, {"value": "bad", "seconds": 0.2}, format="json")
            assert replay.status_code == 200 and replay.json()["vote"] == resp.json()["vote"]
            with lock:
                acknowledged.append(resp.json()["vote"])

    _run_threads(work, [(u,) for u in users])
    _check_exact(campaign, acknowledged)
    assert len(acknowledged) == 40 * 4
    assert set(Vote.objects.filter(campaign=campaign).values_list("value__label", flat=True)) == {"good"}


class Clock:
    """``django.utils.timezone.now`` under the test's control: time moves only when ``advance`` is
    called, so a reservation expires when the test says, however busy the machine is."""

    def __init__(self, start):
        self._now, self._lock = start, threading.Lock()

    def now(self):
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(timezone.now())
    monkeypatch.setattr(timezone, "now", clock.now)
    return clock


def test_expiring_reservations_and_abandoned_tasks_still_end_exact(make_campaign, django_user_model, clock):
    """A quarter of the workers leave holding a reservation; another quarter answer their first task
    only after its reservation expired. Every late answer is taken (its expired reservation still
    holds the slot, or a free one is left) or refused, and the totals are exact either way."""
    users = make_annotators(django_user_model, THREADS, prefix="exp")
    campaign = _campaign(make_campaign, users, n_tasks=30, votes=3)
    expire = campaign.reservation_seconds + 1  # past every reservation made before the advance
    late_workers = [i for i in range(THREADS) if i % 4 == 1]
    acknowledged, refused, late_answers, lock = [], Counter(), Counter(), threading.Lock()
    # The late workers reserve their first task before anyone else starts (30 tasks wait for them),
    # then all four wait until the clock has moved past their reservations.
    first_claims = threading.Barrier(THREADS)
    all_holding = threading.Barrier(len(late_workers), action=lambda: clock.advance(expire))

    def work(user, index):
        late, served = index in late_workers, None
        if not late:  # (no database before the barrier: the process's pool has fewer connections than THREADS)
            first_claims.wait(timeout=60)
        camp = Campaign.objects.get(pk=campaign.pk)
        worker = worker_for_user(user)
        done_votes = 0
        if late:
            served = next_task(camp, worker)
            assert served.task is not None
            first_claims.wait(timeout=60)
            all_holding.wait(timeout=60)
        while True:
            if served is None:
                served = next_task(camp, worker)
            if served.task is None:
                # Nothing for me now, but a task another worker holds comes back to the pool once its
                # reservation expires (abandoned, or refused as expired): leave only when no open task
                # lacks my vote; else move the clock past the reservations held now and look again.
                if not (Task.objects.filter(campaign_id=camp.pk, status=Task.Status.OPEN)
                        .exclude(votes__worker=worker).exists()):
                    return
                clock.advance(expire)
                time.sleep(0.05)  # lets the others run; nothing waits for wall-clock time
                served = None
                continue
            task_id, served = served.task.pk, None
            if index % 4 == 0 and done_votes == 2:
                return  # abandons the reserved task and leaves
            came_late, late = late, False
            try:
                result = submit_vote(camp, worker, task_id, "good", seconds=0.1)
            except RoutingError as exc:
                assert exc.status in (409, 410), exc.message
                with lock:
                    refused[exc.status] += 1
                    late_answers["refused"] += came_late
                continue
            done_votes += 1
            with lock:
                late_answers["taken"] += came_late
                acknowledged.append(result.vote.pk)

    _run_threads(work, [(u, i) for i, u in enumerate(users)])
    _check_exact(campaign, acknowledged)
    assert len(acknowledged) == 30 * 3
    # each late worker answered once after its reservation expired, taken or refused
    assert late_answers["taken"] + late_answers["refused"] == len(late_workers)
