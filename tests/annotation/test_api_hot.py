"""The annotator's hot path API: fetch next task and vote, their permissions, errors, the payload
(no gold answers), and a fixed number of queries per request whatever the campaign's size."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import include, path, reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Membership, Reservation, Task, Vote
from annotation.routing import worker_for_user
from annotation.services import set_gold
from annotation.web.annotator import api as api_hot

from .conftest import make_annotators, make_collection

# The hot path on its own (annotation.api_urls includes it under /api/ for the platform), so these
# tests do not depend on the other campaign endpoints being importable.
urlpatterns = [
    path("api/", include("annotation.web.annotator.api")),
    path("", include("curation.urls")),
]
pytestmark = pytest.mark.urls(__name__)

CSRF = "k" * 32


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def fetch(client, campaign, **extra):
    return client.post(reverse("api-campaign-next", args=[campaign.pk]), format="json", **extra)


def vote(client, campaign, task_id, value, seconds=2.5, **extra):
    return client.post(reverse("api-task-vote", args=[campaign.pk, task_id]), {"value": value, "seconds": seconds},
                       format="json", **extra)


def test_fetch_then_vote_then_replay(make_campaign, bob, monkeypatch):
    scheduled = []
    monkeypatch.setattr(api_hot, "schedule_aggregation", scheduled.append)
    campaign = make_campaign("fluency", members=[bob], votes_per_item=2)
    client = token_client(bob)
    resp = fetch(client, campaign)
    assert resp.status_code == 200, resp.content
    body = resp.json()
    task = Task.objects.get(pk=body["task"]["id"])
    assert body["stage"] == "work" and body["kind"] == "fluency"
    assert body["task"]["caption"] == {"id": task.caption_id, "text": task.caption.text}
    assert body["task"]["image_url"] == reverse("image-file", args=[task.image_id])
    assert body["task"]["role"] == "real" and body["task"]["candidates"] == []
    assert [c["value"] for c in body["choices"]] == ["fluent", "not_fluent", "difficult"]
    assert [c["key"] for c in body["choices"]] == ["1", "2", "3"]
    assert Reservation.objects.get(task=task).expires_at.isoformat() == body["task"]["expires_at"]
    # a reload gives the same task
    assert fetch(client, campaign).json()["task"]["id"] == task.pk

    resp = vote(client, campaign, task.pk, "not_fluent")
    assert resp.status_code == 201, resp.content
    stored = Vote.objects.get(task=task)
    assert resp.json() == {"vote": stored.pk, "created": True, "feedback": None}
    assert stored.value == {"label": "not_fluent"} and stored.seconds == 2.5
    assert scheduled == [campaign.pk]
    again = vote(client, campaign, task.pk, "fluent")  # double click / replay
    assert again.status_code == 200 and again.json()["vote"] == stored.pk and again.json()["created"] is False
    assert Vote.objects.filter(task=task).count() == 1 and Vote.objects.get(task=task).value["label"] == "not_fluent"
    assert scheduled == [campaign.pk]  # nothing new stored, nothing new scheduled
    task.refresh_from_db()
    assert (task.votes_count, task.reserved_count) == (1, 0)
    membership = Membership.objects.get(campaign=campaign, worker__user=bob)
    assert membership.votes == 1 and membership.seconds == 2.5


def test_session_auth_needs_the_csrf_token(make_campaign, bob):
    campaign = make_campaign("quality", members=[bob])
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(bob)
    resp = fetch(client, campaign)
    assert resp.status_code == 403 and "CSRF" in resp.json()["detail"]
    assert not Reservation.objects.exists()
    client.cookies["csrftoken"] = CSRF
    resp = fetch(client, campaign, HTTP_X_CSRFTOKEN=CSRF)
    assert resp.status_code == 200
    task_id = resp.json()["task"]["id"]
    assert vote(client, campaign, task_id, "good").status_code == 403  # no token header
    assert not Vote.objects.exists()
    assert vote(client, campaign, task_id, "good", HTTP_X_CSRFTOKEN=CSRF).status_code == 201


def test_who_may_use_it(make_campaign, bob, dave, alice, django_user_model):
    campaign = make_campaign("quality", members=[bob, dave])
    other = make_campaign("quality", members=[alice])
    anonymous = fetch(APIClient(), campaign)
    assert anonymous.status_code in (401, 403)
    # Dave is a member but has no role: refused before anything is reserved
    resp = fetch(token_client(dave), campaign)
    assert resp.status_code == 403 and "annotator" in resp.json()["detail"]
    bob_client = token_client(bob)
    # another campaign, and one that does not exist, look the same: 404
    for pk in (other.pk, 999999):
        resp = bob_client.post(reverse("api-campaign-next", args=[pk]), format="json")
        assert resp.status_code == 404 and resp.json()["code"] == "not_member"
    foreign_task = other.tasks.first()
    resp = vote(bob_client, other, foreign_task.pk, "good")
    assert resp.status_code == 404
    # a curator who is a member may work too
    assert fetch(token_client(alice), other).status_code == 200
    assert not Reservation.objects.filter(worker__user__in=[bob, dave]).exists()
    # a blocked member is told so
    Membership.objects.filter(campaign=campaign, worker__user=bob).update(blocked=True)
    resp = fetch(bob_client, campaign)
    assert resp.status_code == 403 and resp.json()["code"] == "blocked"
    # GET is not allowed: fetching reserves a task
    assert bob_client.get(reverse("api-campaign-next", args=[campaign.pk])).status_code == 405


def test_bad_votes_get_a_status_and_a_message(make_campaign, bob):
    campaign = make_campaign("fluency", members=[bob], reservation_seconds=60)
    client = token_client(bob)
    task_id = fetch(client, campaign).json()["task"]["id"]
    resp = vote(client, campaign, task_id, "brilliant")
    assert resp.status_code == 400 and resp.json()["code"] == "invalid_value" and "fluent" in resp.json()["detail"]
    resp = client.post(reverse("api-task-vote", args=[campaign.pk, task_id]), {"seconds": 1}, format="json")
    assert resp.status_code == 400 and "value" in resp.json()["detail"]
    resp = client.post(reverse("api-task-vote", args=[campaign.pk, task_id]), "{not json",
                       content_type="application/json")
    assert resp.status_code == 400
    other = campaign.tasks.exclude(pk=task_id).first()
    resp = vote(client, campaign, other.pk, "fluent")
    assert resp.status_code == 409 and resp.json()["code"] == "not_reserved"
    resp = vote(client, campaign, 10**9, "fluent")
    assert resp.status_code == 404 and resp.json()["code"] == "no_task"
    assert not Vote.objects.exists()
    # the reservation is still there: a valid vote after the bad ones is stored
    # expired, and the item got its votes meanwhile (closed here by hand): refused, the slot freed
    Reservation.objects.filter(task_id=task_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    Task.objects.filter(pk=task_id).update(status=Task.Status.DONE)
    resp = vote(client, campaign, task_id, "fluent")
    assert resp.status_code == 410 and resp.json()["code"] == "expired"
    assert Task.objects.get(pk=task_id).reserved_count == 0
    campaign.status = "paused"
    campaign.save()
    resp = fetch(client, campaign)
    assert resp.status_code == 409 and resp.json()["code"] == "not_running"


def test_gold_items_look_like_items_and_answers_stay_hidden(make_campaign, bob, monkeypatch):
    campaign = make_campaign("quality", members=[bob], gold_rate=0.5)
    gold_task = campaign.tasks.order_by("position").last()
    set_gold(gold_task, role="gold", value="bad", feedback="SECRET-FEEDBACK")
    monkeypatch.setattr("annotation.routing.random.random", lambda: 0.0)  # serve the gold item now
    client = token_client(bob)
    resp = fetch(client, campaign)
    body = resp.json()
    assert body["task"]["id"] == gold_task.pk
    assert body["task"]["role"] == "real"
    raw = resp.content.decode()
    assert "gold" not in raw and "SECRET-FEEDBACK" not in raw and "expected" not in raw
    resp = vote(client, campaign, gold_task.pk, "good")
    assert resp.status_code == 201 and resp.json()["feedback"] is None  # no answer revealed for gold
    assert Membership.objects.get(campaign=campaign, worker__user=bob).gold_seen == 1


def test_training_gives_feedback_after_the_answer(make_campaign, bob):
    campaign = make_campaign("fluency", members=[bob])
    first = campaign.tasks.order_by("position").first()
    set_gold(first, role="training", value="fluent", feedback="A whole, grammatical sentence.")
    client = token_client(bob)
    resp = fetch(client, campaign)
    body = resp.json()
    assert body["stage"] == "training" and body["task"]["role"] == "training"
    assert "grammatical" not in resp.content.decode()
    resp = vote(client, campaign, first.pk, "not_fluent")
    assert resp.status_code == 201
    assert resp.json()["feedback"] == {"correct": False, "expected": {"label": "fluent"},
                                       "feedback": "A whole, grammatical sentence."}
    assert fetch(client, campaign).json()["stage"] == "work"


def test_candidates_in_the_workers_order(make_campaign, bob):
    collection = make_collection(name="three each", n=3, captions_per_image=3)
    campaign = make_campaign("good_common_bad", collection=collection, members=[bob])
    client = token_client(bob)
    body = fetch(client, campaign).json()
    task = Task.objects.get(pk=body["task"]["id"])
    kind = campaign.kind_spec
    worker = worker_for_user(bob)
    assert [c["id"] for c in body["task"]["candidates"]] == [int(c) for c in kind.candidate_order(task, worker.pk)]
    assert body["task"]["caption"] is None
    texts = {c["id"]: c["text"] for c in body["task"]["candidates"]}
    assert texts == {c.pk: c.text for c in collection.images.get(pk=task.image_id).captions.all()}
    value = {"ratings": {str(c["id"]): {"label": "good"} for c in body["task"]["candidates"]}}
    assert vote(client, campaign, task.pk, value).status_code == 201


def test_done_when_nothing_is_left(make_campaign, bob):
    campaign = make_campaign("quality", members=[bob], votes_per_item=1, collection=make_collection("two", n=2))
    client = token_client(bob)
    for _ in range(2):
        task_id = fetch(client, campaign).json()["task"]["id"]
        assert vote(client, campaign, task_id, "good").status_code == 201
    body = fetch(client, campaign).json()
    assert body["stage"] == "done" and body["task"] is None and body["message"]


def _steady_counts(campaign, user):
    """Queries of the third fetch and the third submit (the first ones settle the worker's
    stage and open their assignment, once)."""
    client = token_client(user)
    for _ in range(2):
        task_id = fetch(client, campaign).json()["task"]["id"]
        assert vote(client, campaign, task_id, "good").status_code == 201
    with CaptureQueriesContext(connection) as fetch_queries:
        resp = fetch(client, campaign)
    task_id = resp.json()["task"]["id"]
    with CaptureQueriesContext(connection) as vote_queries:
        assert vote(client, campaign, task_id, "good").status_code == 201
    return _statements(fetch_queries), _statements(vote_queries), fetch_queries, vote_queries


def _statements(ctx) -> int:
    """Statements sent, less the savepoints the test's own transaction adds around atomic blocks
    (in production they are BEGIN and COMMIT, or nothing for a single statement)."""
    return sum(1 for q in ctx.captured_queries if q["sql"].split(" ", 1)[0] not in ("SAVEPOINT", "RELEASE"))


def test_queries_per_fetch_and_vote_are_few_and_independent_of_size(make_campaign, django_user_model, settings):
    settings.ANNOTATION_AGGREGATE_DEBOUNCE = 3600  # the debounce is one cache call, not a query
    small_user, large_user = make_annotators(django_user_model, 2, prefix="q")
    small = make_campaign("quality", members=[small_user], collection=make_collection("small", n=5))
    large = make_campaign("quality", members=[large_user], collection=make_collection("large", n=120))
    # the large campaign has history: other workers' votes on many tasks
    others = make_annotators(django_user_model, 3, prefix="hist")
    for user in others:
        Membership.objects.create(campaign=large, worker=worker_for_user(user))
        client = token_client(user)
        for _ in range(10):
            task_id = fetch(client, large).json()["task"]["id"]
            vote(client, large, task_id, "bad")
    small_counts = _steady_counts(small, small_user)
    large_counts = _steady_counts(large, large_user)
    assert small_counts[:2] == large_counts[:2], (small_counts[2].captured_queries, large_counts[2].captured_queries)
    fetch_n, vote_n = large_counts[:2]
    # PostgreSQL, fetch: token+user, membership+campaign+worker+roles, live reservation, SET LOCAL,
    # claim (one statement); vote: token+user, membership..., task lock with reservation, write.
    # Elsewhere the ORM path: a few more, but just as independent of the campaign's size.
    limit_fetch, limit_vote = (5, 4) if connection.vendor == "postgresql" else (9, 10)
    sql = lambda ctx: "\n".join(q["sql"] for q in ctx.captured_queries)  # noqa: E731
    assert fetch_n <= limit_fetch, sql(large_counts[2])
    assert vote_n <= limit_vote, sql(large_counts[3])
