"""A submit sent twice at once, or again later, and a submit that comes after its reservation expired
(issue 23), through the JSON API and the work page's htmx form, on PostgreSQL.

Bob double-clicks, or his browser retries, so the same vote arrives on two connections at the same
moment: every answer is a 200/201 carrying the one stored vote, never a 500. Bob leaves an item open
past its reservation: his answer still counts while the item needs it; when others filled it
meanwhile the page says so and shows what he wrote.
"""
import re
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Membership, Reservation, Task, Vote
from annotation.routing import RoutingError, next_task, submit_vote, sweep_expired, worker_for_user

from ..conftest import REQUIRE_SERVICES
from .conftest import make_annotators

pytestmark = pytest.mark.django_db(transaction=True)

HX = {"HTTP_HX_REQUEST": "true"}
AT_ONCE = 4
TRIALS = 10


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        message = "simultaneous submits need PostgreSQL (one connection per thread): set DATABASE_URL=postgres://..."
        if REQUIRE_SERVICES:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("annotation.tasks.schedule_aggregation", lambda campaign_id: None)


def _at_once(call, n=AT_ONCE):
    """n threads make the same call after a barrier; their results (or exceptions) in a list."""
    barrier, results, lock = threading.Barrier(n), [], threading.Lock()

    def run():
        try:
            barrier.wait(timeout=20)
            outcome = call()
        except BaseException as exc:  # noqa: BLE001 - the test asserts there is none
            outcome = exc
        finally:
            connection.close()
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == n, "a thread hung"
    return results


def test_simultaneous_duplicate_api_submits_all_return_the_one_stored_vote(make_campaign, bob):
    campaign = make_campaign("quality", members=[bob], votes_per_item=2)
    key = Token.objects.create(user=bob).key

    def client():
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return api

    for _ in range(TRIALS):
        task_id = client().post(reverse("api-campaign-next", args=[campaign.pk]), format="json").json()["task"]["id"]
        url = reverse("api-task-vote", args=[campaign.pk, task_id])
        answers = _at_once(lambda: client().post(url, {"value": "good", "seconds": 1.0}, format="json"))
        assert all(not isinstance(a, BaseException) for a in answers), answers
        codes = sorted(a.status_code for a in answers)
        assert codes == [200] * (AT_ONCE - 1) + [201], [a.content for a in answers]
        stored = Vote.objects.get(task_id=task_id)
        assert {a.json()["vote"] for a in answers} == {stored.pk}
        task = Task.objects.get(pk=task_id)
        assert (task.votes_count, task.reserved_count) == (1, 0)
    assert Membership.objects.get(campaign=campaign, worker__user=bob).votes == TRIALS


def test_simultaneous_duplicate_htmx_submits_are_all_answered_and_store_one_vote(make_campaign, bob):
    campaign = make_campaign("quality", members=[bob], votes_per_item=2)
    page = Client()
    page.force_login(bob)
    session = page.cookies["sessionid"].value
    submit = reverse("annotate-submit", args=[campaign.pk])

    def browser_tab():
        tab = Client()
        tab.cookies["sessionid"] = session
        return tab.post(submit, {"task": task_id, "label": "good", "seconds": "2.0"}, **HX)

    for _ in range(TRIALS):
        html = page.get(reverse("annotate", args=[campaign.pk])).content.decode()
        task_id = int(re.search(r'name="task" value="(\d+)"', html).group(1))
        answers = _at_once(browser_tab)
        assert all(not isinstance(a, BaseException) for a in answers), answers
        assert [a.status_code for a in answers] == [200] * AT_ONCE, [a.content[:300] for a in answers]
        assert Vote.objects.filter(task_id=task_id).count() == 1
        assert Task.objects.get(pk=task_id).votes_count == 1
        Reservation.objects.filter(worker__user=bob).delete()  # every tab's next task: start clean
        Task.objects.filter(campaign=campaign).update(reserved_count=0)
    assert Vote.objects.filter(campaign=campaign, worker__user=bob).count() == TRIALS


def _expire(task_id):
    Reservation.objects.filter(task_id=task_id).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_a_late_vote_after_the_sweep_takes_a_free_slot_of_the_item(make_campaign, django_user_model):
    bob, carol = make_annotators(django_user_model, 2, prefix="late")
    campaign = make_campaign("quality", members=[bob, carol], votes_per_item=2)
    bob_w, carol_w = worker_for_user(bob), worker_for_user(carol)
    held = next_task(campaign, bob_w).task
    _expire(held.pk)
    assert sweep_expired(campaign) == 1  # the slot went back to the pool
    assert Task.objects.get(pk=held.pk).reserved_count == 0
    result = submit_vote(campaign, bob_w, held.pk, "good", seconds=700)
    assert result.created
    task = Task.objects.get(pk=held.pk)
    assert (task.votes_count, task.reserved_count) == (1, 0) and not Reservation.objects.filter(task=task).exists()
    assert Membership.objects.get(campaign=campaign, worker=bob_w).votes == 1
    # the same answer again is the stored one; Carol can still give the item its second vote
    assert submit_vote(campaign, bob_w, held.pk, "bad").vote.pk == result.vote.pk
    served = next_task(campaign, carol_w)
    assert served.task.pk == held.pk and submit_vote(campaign, carol_w, held.pk, "good").created
    assert Task.objects.get(pk=held.pk).status == Task.Status.DONE


def test_a_late_vote_on_an_item_filled_meanwhile_is_refused_and_nothing_changes(make_campaign, django_user_model):
    bob, carol, dan = make_annotators(django_user_model, 3, prefix="full")
    campaign = make_campaign("quality", members=[bob, carol, dan], votes_per_item=2)
    bob_w = worker_for_user(bob)
    held = next_task(campaign, bob_w).task
    _expire(held.pk)
    sweep_expired(campaign)
    for user in (carol, dan):  # the item comes back to the pool and gets its two votes
        worker = worker_for_user(user)
        assert next_task(campaign, worker).task.pk == held.pk
        submit_vote(campaign, worker, held.pk, "good")
    with pytest.raises(RoutingError) as refused:
        submit_vote(campaign, bob_w, held.pk, "bad")
    assert refused.value.status == 410 and "all its votes" in refused.value.message
    task = Task.objects.get(pk=held.pk)
    assert (task.votes_count, task.reserved_count, task.status) == (2, 0, Task.Status.DONE)
    assert not Vote.objects.filter(task=task, worker=bob_w).exists()


def test_a_task_never_served_to_the_worker_stays_refused(make_campaign, bob):
    campaign = make_campaign("quality", members=[bob], votes_per_item=2)
    worker = worker_for_user(bob)
    served = next_task(campaign, worker).task
    other = campaign.tasks.exclude(pk=served.pk).first()
    with pytest.raises(RoutingError) as refused:
        submit_vote(campaign, worker, other.pk, "good")
    assert refused.value.status == 409 and refused.value.code == "not_reserved"


def test_the_page_says_a_late_caption_was_not_needed_and_keeps_what_was_written(make_campaign, django_user_model):
    bob, carol = make_annotators(django_user_model, 2, prefix="writer")
    campaign = make_campaign("write", members=[bob, carol], votes_per_item=1)
    page = Client()
    page.force_login(bob)
    html = page.get(reverse("annotate", args=[campaign.pk])).content.decode()
    task_id = int(re.search(r'name="task" value="(\d+)"', html).group(1))
    _expire(task_id)
    sweep_expired(campaign)
    carol_w = worker_for_user(carol)
    assert next_task(campaign, carol_w).task.pk == task_id
    submit_vote(campaign, carol_w, task_id, {"text": "A dog runs along the beach at sunset."})
    text = "Two children play near a fountain in the park on a sunny day."
    response = page.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task_id, "text": text}, **HX)
    assert response.status_code == 410
    html = response.content.decode()
    assert "expired and it has all its votes now" in html
    assert re.search(r'data-role="unsaved".*?<textarea[^>]*readonly[^>]*>' + re.escape(text) + "</textarea>", html,
                     re.S)
    assert not Vote.objects.filter(task_id=task_id, worker__user=bob).exists()


def test_a_late_caption_with_room_left_is_stored(make_campaign, bob):
    campaign = make_campaign("write", members=[bob], votes_per_item=2)
    page = Client()
    page.force_login(bob)
    html = page.get(reverse("annotate", args=[campaign.pk])).content.decode()
    task_id = int(re.search(r'name="task" value="(\d+)"', html).group(1))
    _expire(task_id)
    sweep_expired(campaign)
    text = "An old castle stands on a hill under a cloudy sky."
    response = page.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task_id, "text": text}, **HX)
    assert response.status_code == 200
    vote = Vote.objects.get(task_id=task_id, worker__user=bob)
    assert vote.value == {"text": text} and vote.caption.text == text
    assert Task.objects.get(pk=task_id).votes_count == 1
