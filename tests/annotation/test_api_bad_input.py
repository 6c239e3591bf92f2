"""Issue 4's bad-input list through the API: each bad request gets the right status and a clear
message, and no valid vote is lost.

The hot path (fetch next task, submit a vote) is ``annotation.web.annotator.api``; the rest (CSRF, another
campaign's tasks, curator endpoints) goes through ``annotation.web.curator.api``.
"""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import Reservation, Task, Vote
from annotation.routing import next_task, submit_vote, worker_for_user
from curation.models import Caption

from .conftest import make_annotators

pytestmark = pytest.mark.django_db

CSRF = "c" * 32  # a CSRF secret: Django accepts it as the cookie and, unmasked, as the header


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def next_url(campaign):
    return reverse("api-campaign-next", args=[campaign.pk])


def vote_url(campaign, task_id):
    return reverse("api-task-vote", args=[campaign.pk, task_id])


def _task_id(body: dict) -> int:
    """The served task's id, wherever the hot endpoint puts it."""
    task = body.get("task")
    if isinstance(task, dict):
        return task["id"]
    return body.get("task_id") or task


def _vote_id(body: dict) -> int:
    vote = body.get("vote")
    if isinstance(vote, dict):
        return vote["id"]
    return body.get("vote_id") or body.get("id") or vote


@pytest.fixture
def bob_api(bob):
    api = APIClient()
    api.force_authenticate(bob)
    return api


@pytest.fixture
def quality(make_campaign, bob):
    return make_campaign("quality", members=[bob], votes_per_item=2)


def _fetch(api, campaign) -> int:
    response = api.post(next_url(campaign), {}, format="json")
    assert response.status_code == 200, response.content
    return _task_id(response.json())


# --- the hot path -------------------------------------------------------------------------------


def test_a_vote_on_a_task_not_reserved_to_the_worker_is_a_409(bob_api, quality):
    served = _fetch(bob_api, quality)
    other = quality.tasks.exclude(pk=served).first()
    response = bob_api.post(vote_url(quality, other.pk), {"value": "good"}, format="json")
    assert response.status_code == 409
    assert "not reserved" in response.json()["detail"]
    assert not Vote.objects.filter(task=other).exists()
    # the reserved task still takes its vote
    assert bob_api.post(vote_url(quality, served), {"value": "good"}, format="json").status_code == 201


def test_a_double_submit_gives_one_vote(bob_api, quality):
    task_id = _fetch(bob_api, quality)
    first = bob_api.post(vote_url(quality, task_id), {"value": "good", "seconds": 1.2}, format="json")
    again = bob_api.post(vote_url(quality, task_id), {"value": "bad", "seconds": 0.1}, format="json")
    assert first.status_code == 201 and again.status_code == 200
    assert _vote_id(first.json()) == _vote_id(again.json())
    votes = Vote.objects.filter(task_id=task_id)
    assert votes.count() == 1 and votes.get().value == {"label": "good"}
    assert Task.objects.get(pk=task_id).votes_count == 1


def test_a_value_outside_the_choices_is_a_400_and_the_reservation_stays(bob_api, quality):
    task_id = _fetch(bob_api, quality)
    response = bob_api.post(vote_url(quality, task_id), {"value": "brilliant"}, format="json")
    assert response.status_code == 400
    assert "choices" in response.json()["detail"] and "good" in response.json()["detail"]
    assert not Vote.objects.filter(task_id=task_id).exists()
    assert bob_api.post(vote_url(quality, task_id), {"value": "bad"}, format="json").status_code == 201


def test_a_vote_after_the_reservation_expired_is_taken_while_the_item_needs_it(bob_api, quality):
    task_id = _fetch(bob_api, quality)
    Reservation.objects.filter(task_id=task_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bob_api.post(vote_url(quality, task_id), {"value": "good"}, format="json")
    assert response.status_code == 201, response.content
    task = Task.objects.get(pk=task_id)
    assert (task.reserved_count, task.votes_count) == (0, 1) and Vote.objects.filter(task=task).count() == 1


def test_a_caption_with_html_is_a_400_and_plain_text_is_stored_verbatim_and_returned_as_json(
        make_campaign, bob, bob_api):
    write = make_campaign("write", members=[bob], votes_per_item=1)
    task_id = _fetch(bob_api, write)
    tagged = '<script>alert("x")</script> A <b>dog</b> runs on the beach & barks'
    refused = bob_api.post(vote_url(write, task_id), {"value": {"text": tagged}}, format="json")
    assert refused.status_code == 400 and "HTML tags" in refused.json()["detail"]
    assert not Caption.objects.filter(origin=Caption.Origin.CROWD).exists()
    text = 'A dog called "Rex" runs on the beach & barks at <3 gulls'
    response = bob_api.post(vote_url(write, task_id), {"value": {"text": text}}, format="json")
    assert response.status_code == 201, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response["X-Content-Type-Options"] == "nosniff"
    caption = Caption.objects.get(origin=Caption.Origin.CROWD)
    assert caption.text == text  # text, not sanitised HTML: escaping is the renderer's job
    mine = bob_api.get(f"/api/campaigns/{write.pk}/votes/")
    assert mine["Content-Type"].startswith("application/json")
    assert mine.json()["results"][0]["value"] == {"text": text}


def test_a_caption_over_the_length_limit_is_a_400_with_the_limit(make_campaign, bob, bob_api):
    write = make_campaign("write", members=[bob], votes_per_item=1, text_max_chars=40)
    task_id = _fetch(bob_api, write)
    response = bob_api.post(vote_url(write, task_id), {"value": {"text": "a dog " * 20}}, format="json")
    assert response.status_code == 400
    assert "too long" in response.json()["detail"] and "at most 40" in response.json()["detail"]
    assert not Caption.objects.filter(origin=Caption.Origin.CROWD).exists()
    ok = bob_api.post(vote_url(write, task_id), {"value": {"text": "A dog on a beach."}}, format="json")
    assert ok.status_code == 201


def test_a_missing_csrf_token_with_session_auth_is_a_403_and_nothing_is_stored(quality, bob):
    api = APIClient(enforce_csrf_checks=True)
    assert api.login(username="bob", password="bob-pw-123")
    response = api.post(next_url(quality), {}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert not Reservation.objects.exists()
    api.cookies["csrftoken"] = CSRF
    served = api.post(next_url(quality), {}, format="json", HTTP_X_CSRFTOKEN=CSRF)
    assert served.status_code == 200
    task_id = _task_id(served.json())
    response = api.post(vote_url(quality, task_id), {"value": "good"}, format="json")  # header forgotten
    assert response.status_code == 403 and not Vote.objects.exists()
    response = api.post(vote_url(quality, task_id), {"value": "good"}, format="json", HTTP_X_CSRFTOKEN=CSRF)
    assert response.status_code == 201 and Vote.objects.count() == 1


def test_another_campaigns_tasks_are_refused_on_the_hot_path(make_campaign, bob_api, quality, django_user_model):
    (erin,) = make_annotators(django_user_model, 1, prefix="erin")
    theirs = make_campaign("quality", members=[erin], name="erin's")
    response = bob_api.post(next_url(theirs), {}, format="json")
    assert response.status_code in (403, 404) and response.json()["detail"]
    erin_task = next_task(theirs, worker_for_user(erin)).task
    response = bob_api.post(vote_url(theirs, erin_task.pk), {"value": "good"}, format="json")
    assert response.status_code in (403, 404, 409) and response.json()["detail"]
    # a task of another campaign under Bob's own campaign's URL
    response = bob_api.post(vote_url(quality, erin_task.pk), {"value": "good"}, format="json")
    assert response.status_code == 404 and response.json()["detail"] == "No such task in this campaign."
    assert not Vote.objects.exists()


def test_a_paused_campaign_serves_nothing(bob_api, quality):
    quality.status = "paused"
    quality.save()
    response = bob_api.post(next_url(quality), {}, format="json")
    assert response.status_code == 409 and "paused" in response.json()["detail"]


# --- the rest of the API ------------------------------------------------------------------------


def test_a_missing_csrf_token_on_a_vote_edit_is_a_403_and_the_vote_is_unchanged(quality, bob):
    worker = worker_for_user(bob)
    served = next_task(quality, worker)
    vote = submit_vote(quality, worker, served.task.pk, "good").vote
    api = APIClient(enforce_csrf_checks=True)
    assert api.login(username="bob", password="bob-pw-123")
    url = f"/api/campaigns/{quality.pk}/votes/{vote.pk}/"
    response = api.patch(url, {"value": "bad"}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    vote.refresh_from_db()
    assert vote.value == {"label": "good"} and not vote.edits.exists()
    api.cookies["csrftoken"] = CSRF
    response = api.patch(url, {"value": "bad"}, format="json", HTTP_X_CSRFTOKEN=CSRF)
    assert response.status_code == 200 and response.json()["value"] == {"label": "bad"}


def test_a_missing_csrf_token_on_campaign_creation_is_a_403(alice, collection):
    api = APIClient(enforce_csrf_checks=True)
    assert api.login(username="alice", password="alice-pw-123")
    response = api.post("/api/campaigns/", {"name": "x", "kind": "quality", "collection": collection.pk},
                        format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert api.get("/api/campaigns/").status_code == 200  # safe methods need no token


def test_an_annotator_requesting_another_campaigns_tasks_or_votes(make_campaign, bob_api, django_user_model):
    (erin,) = make_annotators(django_user_model, 1, prefix="erin")
    theirs = make_campaign("quality", members=[erin], name="erin's")
    worker = worker_for_user(erin)
    vote = submit_vote(theirs, worker, next_task(theirs, worker).task.pk, "good").vote
    response = bob_api.get(f"/api/campaigns/{theirs.pk}/tasks/")
    assert response.status_code == 403 and response.json()["detail"] == "This endpoint needs the curator role."
    for url in (f"/api/campaigns/{theirs.pk}/votes/", f"/api/campaigns/{theirs.pk}/votes/{vote.pk}/",
                f"/api/campaigns/{theirs.pk}/progress/"):
        response = bob_api.get(url)
        assert response.status_code == 404, url
        assert response.json()["detail"] == "No such campaign, or you are not a member of it."
    response = bob_api.patch(f"/api/campaigns/{theirs.pk}/votes/{vote.pk}/", {"value": "bad"}, format="json")
    assert response.status_code == 404
    vote.refresh_from_db()
    assert vote.value == {"label": "good"}


def test_an_annotator_requesting_curator_endpoints_gets_403_with_the_role_needed(bob_api, quality):
    for method, url, body in [
        ("get", f"/api/campaigns/{quality.pk}/gold/", None),
        ("get", f"/api/campaigns/{quality.pk}/workers/", None),
        ("get", f"/api/campaigns/{quality.pk}/aggregates/", None),
        ("get", f"/api/campaigns/{quality.pk}/agreement/", None),
        ("post", f"/api/campaigns/{quality.pk}/status/", {"status": "finished"}),
        ("post", "/api/campaigns/", {"name": "mine", "kind": "quality", "collection": quality.collection_id}),
        ("get", "/api/collections/", None),
    ]:
        response = getattr(bob_api, method)(url, body, format="json")
        assert response.status_code == 403, url
        assert "curator role" in response.json()["detail"], url
    quality.refresh_from_db()
    assert quality.status == "running"


def test_malformed_json_is_a_400(alice, quality):
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post(f"/api/campaigns/{quality.pk}/status/", '{"status": ', content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["detail"]
