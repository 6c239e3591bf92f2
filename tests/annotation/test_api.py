"""The campaign API: the permission matrix, creating from a selection, settings and status,
annotators' narrow view (their campaigns, their votes, never gold), vote edits with their audit
trail, blocking, aggregates, agreement, gold answers, workers and members."""
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from kombu.exceptions import OperationalError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation import routing
from annotation import tasks as annotation_tasks
from annotation.models import Aggregate, Campaign, Membership, Reservation, Task, Vote, VoteEdit
from annotation.routing import RoutingError, next_task, submit_vote, worker_for_user
from annotation.services import set_gold
from captionlab import roles

from .conftest import make_annotators, make_collection

pytestmark = pytest.mark.django_db

GOLD_MARKER = "GOLD-FEEDBACK-7f3a: the expected answer"


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """The matrix creates five users per test; a slow password hash would dominate its run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def erin(django_user_model):
    """Erin is another annotator."""
    (user,) = make_annotators(django_user_model, 1, prefix="erin")
    return user


def _vote(campaign, user, value):
    """Bob (or anyone) takes the next task and votes on it through the routing service."""
    worker = worker_for_user(user)
    served = next_task(campaign, worker)
    return submit_vote(campaign, worker, served.task.pk, value, seconds=2.0).vote


def _gold_vote(campaign, user, value):
    """Make the first open real task a gold item and have the user vote on it."""
    task = campaign.tasks.filter(role=Task.Role.REAL, votes_count=0).first()
    set_gold(task, role=Task.Role.GOLD, value="good", feedback=GOLD_MARKER)
    worker = worker_for_user(user)
    Reservation.objects.create(task=task, worker=worker, campaign=campaign,
                               expires_at=timezone.now() + timedelta(minutes=5))
    return submit_vote(campaign, worker, task.pk, value).vote


@pytest.fixture
def setup(make_campaign, alice, bob, carol, dave, erin):
    """A running quality campaign with Bob and Erin as members and one vote each."""
    campaign = make_campaign("quality", members=[bob, erin], votes_per_item=2)
    _vote(campaign, bob, "good")
    _vote(campaign, erin, "bad")
    return campaign


# --- permission matrix ---------------------------------------------------------------------------

# (method, path under /api/campaigns/<id>/, body, status for curators, status for Bob the member)
ENDPOINTS = [
    ("get", "", None, 200, 200),
    ("get", "progress/", None, 200, 200),
    ("get", "votes/", None, 200, 200),
    ("get", "tasks/", None, 200, 403),
    ("get", "aggregates/", None, 200, 403),
    ("get", "agreement/", None, 200, 403),
    ("get", "gold/", None, 200, 403),
    ("get", "workers/", None, 200, 403),
    ("post", "members/", {"usernames": ["erin0"]}, 200, 403),
    ("post", "status/", {"status": "paused"}, 200, 403),
    ("patch", "", {"instructions": "Look closely."}, 409, 403),  # running: pause first
    ("post", "aggregate/", {}, 202, 403),
    ("post", "gold/", "GOLD", 201, 403),
    ("post", "workers/BOB/block/", {"blocked": True, "reason": "spam"}, 200, 403),
]


@pytest.mark.parametrize("method,suffix,body,curator_status,member_status", ENDPOINTS,
                         ids=[f"{m} {s or 'detail'}" for m, s, *_ in ENDPOINTS])
@pytest.mark.parametrize("persona", ["alice", "carol", "bob", "dave", "anonymous"])
def test_permission_matrix(api, setup, request, monkeypatch, persona, method, suffix, body, curator_status,
                           member_status, bob):
    monkeypatch.setattr(annotation_tasks.aggregate_campaign, "delay", lambda *a, **k: type("R", (), {"id": "x"}))
    campaign = setup
    suffix = suffix.replace("BOB", str(worker_for_user(bob).pk))
    if body == "GOLD":
        body = {"task": campaign.tasks.filter(votes_count=0).first().pk, "role": "gold", "value": "good"}
    if persona != "anonymous":
        api.force_authenticate(request.getfixturevalue(persona))
    response = getattr(api, method)(f"/api/campaigns/{campaign.pk}/{suffix}", body, format="json")
    expected = {"alice": curator_status, "carol": curator_status, "bob": member_status}.get(persona, 403)
    assert response.status_code == expected, response.content
    if expected == 403:
        detail = response.json()["detail"]
        if persona == "anonymous":
            assert "credentials" in detail
        elif persona == "dave":
            assert "annotator or curator role" in detail or "curator role" in detail
        else:
            assert "curator role" in detail


def test_anonymous_and_roleless_users_cannot_list(api, setup, dave):
    assert api.get("/api/campaigns/").status_code in (401, 403)
    api.force_authenticate(dave)
    response = api.get("/api/campaigns/")
    assert response.status_code == 403
    assert response.json()["detail"] == "The campaign API needs the annotator or curator role."


def test_token_auth_works_for_curators(api, setup, alice):
    token = Token.objects.create(user=alice)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = api.get("/api/campaigns/").json()
    assert [c["id"] for c in body["results"]] == [setup.pk]
    assert body["results"][0]["task_count"] == 12 and body["results"][0]["member_count"] == 2


# --- annotators: their campaigns, their votes, never gold ------------------------------------------


def test_annotators_list_only_their_campaigns_in_a_reduced_view(api, make_campaign, bob, erin):
    mine = make_campaign("quality", members=[bob], name="mine")
    make_campaign("quality", members=[bob], status="draft", name="my draft")
    open_running = make_campaign("fluency", open_to_all=True, name="open to all")
    open_paused = make_campaign("fluency", open_to_all=True, name="open but paused")
    open_paused.status = Campaign.Status.PAUSED
    open_paused.save()
    others = make_campaign("quality", members=[erin], name="erin's")
    api.force_authenticate(bob)
    body = api.get("/api/campaigns/").json()
    assert sorted(c["name"] for c in body["results"]) == ["mine", "open to all"]
    row = body["results"][0]
    for hidden in ("selection", "stats", "created_by", "task_count", "collection", "gold_rate"):
        assert hidden not in row
    assert {c["value"] for c in next(r for r in body["results"] if r["id"] == mine.pk)["choices"]} == {"good", "bad"}
    assert api.get(f"/api/campaigns/{open_running.pk}/").status_code == 200
    for hidden in (others, open_paused):
        response = api.get(f"/api/campaigns/{hidden.pk}/")
        assert response.status_code == 404
        assert response.json()["detail"] == "No such campaign, or you are not a member of it."
        assert api.get(f"/api/campaigns/{hidden.pk}/votes/").status_code == 404
    assert api.get("/api/campaigns/not-a-number/").status_code == 404


def test_annotators_see_only_their_own_votes_without_role_or_correctness(api, setup, bob, erin):
    campaign = setup
    _gold_vote(campaign, bob, "bad")
    api.force_authenticate(bob)
    body = api.get(f"/api/campaigns/{campaign.pk}/votes/").json()
    assert body["count"] == 2
    bob_worker = worker_for_user(bob)
    assert {v["id"] for v in body["results"]} == set(
        Vote.objects.filter(worker=bob_worker).values_list("pk", flat=True))
    for vote in body["results"]:
        assert set(vote) == {"id", "task", "value", "seconds", "created_at", "updated_at", "editable_until", "edits"}
    erin_vote = Vote.objects.get(worker__user=erin)
    assert api.get(f"/api/campaigns/{campaign.pk}/votes/{erin_vote.pk}/").status_code == 404
    # a worker filter is a curator's: refused for annotators rather than silently ignored
    response = api.get(f"/api/campaigns/{campaign.pk}/votes/", {"worker": worker_for_user(erin).pk})
    assert response.status_code == 400 and "unknown filter" in response.json()["detail"]


def test_gold_answers_never_reach_annotators(api, setup, bob):
    campaign = setup
    _gold_vote(campaign, bob, "bad")
    api.force_authenticate(bob)
    seen = []
    for suffix in ("", "progress/", "votes/", "gold/", "tasks/", "agreement/", "aggregates/", "workers/"):
        response = api.get(f"/api/campaigns/{campaign.pk}/{suffix}")
        seen.append(response.content.decode())
        if suffix in ("gold/", "tasks/", "agreement/", "aggregates/", "workers/"):
            assert response.status_code == 403, suffix
    seen.append(api.get("/api/campaigns/").content.decode())
    assert not any(GOLD_MARKER in text for text in seen)
    assert not any('"correct"' in text or '"role"' in text for text in seen)
    # the curator sees it
    api.force_authenticate(None)
    api.force_authenticate(Campaign.objects.get(pk=campaign.pk).created_by)
    gold = api.get(f"/api/campaigns/{campaign.pk}/gold/").json()
    assert gold["count"] == 1 and gold["results"][0]["feedback"] == GOLD_MARKER


def test_annotator_progress_is_their_own_and_curator_progress_is_the_campaign(api, setup, bob, alice):
    api.force_authenticate(bob)
    mine = api.get(f"/api/campaigns/{setup.pk}/progress/").json()
    assert mine == {"done": 1, "remaining": 11}
    api.force_authenticate(alice)
    whole = api.get(f"/api/campaigns/{setup.pk}/progress/").json()
    assert whole["tasks"] == 12 and whole["votes"] == 2 and whole["votes_required"] == 24


# --- curators: create, update, status ---------------------------------------------------------------


def test_curator_creates_a_campaign_from_a_selection(api, alice, bob, collection):
    api.force_authenticate(alice)
    response = api.post("/api/campaigns/", {
        "name": "Fluency sample", "kind": "fluency", "collection": collection.pk, "sample": 5, "seed": 3,
        "members": ["bob"], "status": "running", "votes_per_item": 3, "instructions": "# Read *carefully*",
        "priority": "random"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    campaign = Campaign.objects.get(pk=body["id"])
    assert body["task_count"] == 5 and campaign.tasks.count() == 5
    assert body["status"] == "running" and body["selection"]["sample"] == 5
    assert body["created_by"] == "alice" and body["priority"] == "random"
    assert Membership.objects.filter(campaign=campaign, worker__user=bob).exists()
    assert set(campaign.tasks.values_list("votes_required", flat=True)) == {3}


@pytest.mark.parametrize("change,field,message", [
    ({"kind": "sculpture"}, "kind", "Unknown campaign kind 'sculpture'"),
    ({"collection": None}, "collection", "may not be null"),
    ({"collection": 999999}, "collection", "Choose an existing collection."),
    ({"score_min": 0.3, "score_max": 0.7}, "score_min", "A score range needs a filter run and a step."),
    ({"score_min": 0.7, "score_max": 0.3, "run": 1, "step": 0}, "score_max", "The score range is empty"),
    ({"members": ["bob", "nobody"]}, "members", "No active user named nobody."),
    ({"members": ["dave"]}, "members", "Not an annotator: dave."),
    ({"votes_per_item": 0}, "votes_per_item", "greater than or equal to 1"),
    ({"status": "finished"}, "status", "is not a valid choice"),
    ({"name": "   "}, "name", "may not be blank"),
    ({"sample": 0}, "sample", "greater than or equal to 1"),
])
def test_create_refuses_bad_input_with_field_messages(api, alice, bob, dave, collection, change, field, message):
    api.force_authenticate(alice)
    data = {"name": "Bad one", "kind": "quality", "collection": collection.pk, **change}
    response = api.post("/api/campaigns/", data, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert message in " ".join(errors[field]), errors
    assert not Campaign.objects.exists()


def test_create_without_a_collection_says_it_is_required(api, alice):
    api.force_authenticate(alice)
    response = api.post("/api/campaigns/", {"name": "x", "kind": "quality"}, format="json")
    assert response.status_code == 400
    assert response.json()["collection"] == ["This field is required."]


def test_create_refuses_a_duplicate_name_and_an_empty_selection(api, alice, make_campaign, collection):
    existing = make_campaign("quality", name="Taken")
    api.force_authenticate(alice)
    response = api.post("/api/campaigns/", {"name": "Taken", "kind": "quality", "collection": collection.pk},
                        format="json")
    assert response.status_code == 400 and "already exists" in response.json()["name"][0]
    empty = make_collection(name="empty", n=0)
    response = api.post("/api/campaigns/", {"name": "Empty", "kind": "quality", "collection": empty.pk},
                        format="json")
    assert response.status_code == 400 and response.json()["collection"] == ["The selection holds no items."]
    assert list(Campaign.objects.values_list("pk", flat=True)) == [existing.pk]


def test_settings_change_only_while_draft_or_paused(api, alice, setup):
    campaign = setup
    api.force_authenticate(alice)
    url = f"/api/campaigns/{campaign.pk}/"
    response = api.patch(url, {"instructions": "new"}, format="json")
    assert response.status_code == 409 and "pause it first" in response.json()["detail"]
    assert api.post(f"{url}status/", {"status": "paused"}, format="json").json()["status"] == "paused"
    response = api.patch(url, {"instructions": "Be *kind*.", "votes_per_item": 3, "gold_rate": 0.1}, format="json")
    assert response.status_code == 200, response.content
    campaign.refresh_from_db()
    assert campaign.instructions == "Be *kind*." and campaign.votes_per_item == 3 and campaign.gold_rate == 0.1
    assert set(campaign.tasks.filter(role="real").values_list("votes_required", flat=True)) == {3}
    # fixed fields, out-of-range values and a lower requirement once votes exist are refused
    response = api.patch(url, {"kind": "write", "collection": 1}, format="json")
    assert response.status_code == 400 and set(response.json()) == {"kind", "collection"}
    assert api.patch(url, {"gold_rate": 0.9}, format="json").status_code == 400
    response = api.patch(url, {"votes_per_item": 1}, format="json")
    assert response.status_code == 400 and "only be raised" in response.json()["votes_per_item"][0]
    assert api.put(url, {"name": "x"}, format="json").status_code == 405


def test_status_changes_follow_the_allowed_transitions(api, alice, setup):
    api.force_authenticate(alice)
    url = f"/api/campaigns/{setup.pk}/status/"
    response = api.post(url, {"status": "draft"}, format="json")
    assert response.status_code == 400 and response.json() == {"status": ["A running campaign cannot become draft."]}
    response = api.post(url, {"status": "sleeping"}, format="json")
    assert response.status_code == 400 and "Unknown status" in response.json()["status"][0]
    assert api.post(url, {"status": "finished"}, format="json").json()["status"] == "finished"
    assert Campaign.objects.get(pk=setup.pk).status == "finished"


def test_members_are_added_by_username(api, alice, setup, django_user_model):
    (frank,) = make_annotators(django_user_model, 1, prefix="frank")
    api.force_authenticate(alice)
    url = f"/api/campaigns/{setup.pk}/members/"
    response = api.post(url, {"usernames": ["frank0", "bob"]}, format="json")
    assert response.json() == {"added": 1, "members": ["bob", "erin0", "frank0"]}
    response = api.post(url, {"usernames": ["ghost"]}, format="json")
    assert response.status_code == 400 and response.json() == {"usernames": ["No active user named ghost."]}
    assert api.post(url, {"usernames": []}, format="json").status_code == 400


def test_campaign_list_filters_are_whitelisted(api, alice, make_campaign):
    make_campaign("quality", name="q")
    make_campaign("fluency", name="f", status="draft")
    api.force_authenticate(alice)
    assert [c["name"] for c in api.get("/api/campaigns/", {"kind": "fluency"}).json()["results"]] == ["f"]
    assert [c["name"] for c in api.get("/api/campaigns/", {"status": "running"}).json()["results"]] == ["q"]
    response = api.get("/api/campaigns/", {"created_by__password__startswith": "pbkdf2"})
    assert response.status_code == 400 and "unknown filter" in response.json()["detail"]
    assert api.get("/api/campaigns/", {"ordering": "created_by__password"}).status_code == 400


# --- tasks, votes, edits ------------------------------------------------------------------------


def test_curators_see_tasks_with_counts_gold_and_aggregates(api, alice, setup):
    campaign = setup
    task = Vote.objects.filter(campaign=campaign).first().task
    Aggregate.objects.create(task=task, method="majority", label="good", confidence=0.5, n_votes=1)
    gold_task = campaign.tasks.filter(votes_count=0).first()
    set_gold(gold_task, role=Task.Role.TRAINING, value="bad", feedback="Look at the subject.")
    api.force_authenticate(alice)
    body = api.get(f"/api/campaigns/{campaign.pk}/tasks/").json()
    assert body["count"] == 12
    row = next(r for r in body["results"] if r["id"] == task.pk)
    assert row["votes_count"] == 2 and row["aggregates"][0]["label"] == "good" and row["caption_text"]
    training = api.get(f"/api/campaigns/{campaign.pk}/tasks/", {"role": "training"}).json()["results"]
    assert [r["id"] for r in training] == [gold_task.pk]
    assert training[0]["gold"] == {"value": {"label": "bad"}, "feedback": "Look at the subject.", "tolerance": 0.0}
    assert api.get(f"/api/campaigns/{campaign.pk}/tasks/", {"votes__worker": 1}).status_code == 400


def test_curators_filter_votes_by_worker_task_and_role(api, alice, setup, bob, erin):
    api.force_authenticate(alice)
    url = f"/api/campaigns/{setup.pk}/votes/"
    everything = api.get(url).json()
    assert everything["count"] == 2 and {v["worker_name"] for v in everything["results"]} == {"bob", "erin0"}
    only_erin = api.get(url, {"worker": worker_for_user(erin).pk}).json()["results"]
    assert [v["value"] for v in only_erin] == [{"label": "bad"}]
    assert api.get(url, {"role": "gold"}).json()["count"] == 0
    assert api.get(url, {"worker": "erin"}).status_code == 400


def test_an_annotator_edits_their_vote_within_the_window_with_an_audit_trail(api, setup, bob, erin, alice):
    campaign = setup
    vote = Vote.objects.get(worker__user=bob)
    api.force_authenticate(bob)
    url = f"/api/campaigns/{campaign.pk}/votes/{vote.pk}/"
    response = api.patch(url, {"value": "bad"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["value"] == {"label": "bad"}
    assert body["edits"][0]["old_value"] == {"label": "good"} and body["edits"][0]["new_value"] == {"label": "bad"}
    assert VoteEdit.objects.filter(vote=vote).count() == 1
    # a bad value: 400, the vote unchanged
    response = api.patch(url, {"value": "excellent"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_value"
    assert "choices" in response.json()["detail"]
    assert api.patch(url, {}, format="json").status_code == 400
    # someone else's vote: 404, untouched
    erin_vote = Vote.objects.get(worker__user=erin)
    response = api.patch(f"/api/campaigns/{campaign.pk}/votes/{erin_vote.pk}/", {"value": "good"}, format="json")
    assert response.status_code == 404 and response.json()["detail"] == "No such vote of yours."
    erin_vote.refresh_from_db()
    assert erin_vote.value == {"label": "bad"}
    # the window closes: 409, and the audit trail keeps the one edit
    Vote.objects.filter(pk=vote.pk).update(created_at=timezone.now() - timedelta(seconds=campaign.edit_window_seconds
                                                                                 + 1))
    response = api.patch(url, {"value": "good"}, format="json")
    assert response.status_code == 409 and "edit window" in response.json()["detail"]
    vote.refresh_from_db()
    assert vote.value == {"label": "bad"} and vote.edits.count() == 1
    # the curator sees the vote with its worker and its edits
    api.force_authenticate(alice)
    seen = api.get(url).json()
    assert seen["worker_name"] == "bob" and len(seen["edits"]) == 1


def test_a_blocked_annotator_cannot_edit(api, setup, bob):
    vote = Vote.objects.get(worker__user=bob)
    routing.block_worker(setup, worker_for_user(bob), reason="spam")
    api.force_authenticate(bob)
    response = api.patch(f"/api/campaigns/{setup.pk}/votes/{vote.pk}/", {"value": "bad"}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "blocked"


def test_blocking_through_the_api_reopens_the_workers_tasks(api, make_campaign, alice, bob, erin, django_user_model):
    campaign = make_campaign("quality", members=[bob, erin], votes_per_item=1)
    voted = [_vote(campaign, bob, "good").task_id for _ in range(3)]
    assert set(Task.objects.filter(pk__in=voted).values_list("status", flat=True)) == {"done"}
    api.force_authenticate(alice)
    bob_worker = worker_for_user(bob)
    response = api.post(f"/api/campaigns/{campaign.pk}/workers/{bob_worker.pk}/block/",
                        {"blocked": True, "reason": "random clicking"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"worker": bob_worker.pk, "blocked": True, "reason": "random clicking",
                               "tasks_reopened": 3}
    assert set(Task.objects.filter(pk__in=voted).values_list("status", flat=True)) == {"open"}
    assert Membership.objects.get(campaign=campaign, worker=bob_worker).blocked
    with pytest.raises(RoutingError) as exc:
        next_task(campaign, bob_worker)
    assert exc.value.status == 403
    workers = api.get(f"/api/campaigns/{campaign.pk}/workers/", {"blocked": "true"}).json()["results"]
    assert [(w["name"], w["blocked_reason"]) for w in workers] == [("bob", "random clicking")]
    # unblock: the votes count again
    response = api.post(f"/api/campaigns/{campaign.pk}/workers/{bob_worker.pk}/block/", {"blocked": False},
                        format="json")
    assert response.json()["blocked"] is False
    assert set(Task.objects.filter(pk__in=voted).values_list("status", flat=True)) == {"done"}
    # a worker who is not a member
    (stranger,) = make_annotators(django_user_model, 1, prefix="stranger")
    response = api.post(f"/api/campaigns/{campaign.pk}/workers/{worker_for_user(stranger).pk}/block/", {},
                        format="json")
    assert response.status_code == 404 and "not a member" in response.json()["detail"]


# --- aggregation, agreement, gold, workers --------------------------------------------------------


def test_aggregates_are_listed_with_method_and_part_filters(api, alice, setup):
    task = setup.tasks.first()
    Aggregate.objects.create(task=task, method="majority", label="good", confidence=1.0, n_votes=2)
    Aggregate.objects.create(task=task, method="dawid_skene", label="bad", confidence=0.6, n_votes=2)
    api.force_authenticate(alice)
    url = f"/api/campaigns/{setup.pk}/aggregates/"
    assert api.get(url).json()["count"] == 2
    rows = api.get(url, {"method": "dawid_skene"}).json()["results"]
    assert [(r["task"], r["label"], r["confidence"]) for r in rows] == [(task.pk, "bad", 0.6)]
    assert api.get(url, {"part": "x"}).json()["count"] == 0
    assert api.get(url, {"label": "good"}).status_code == 400


def test_agreement_and_workers_read_the_campaign_stats(api, alice, setup, bob):
    bob_worker = worker_for_user(bob)
    setup.stats = {"computed_at": "2025-01-01T00:00:00Z", "n_votes": 2,
                   "agreement": {"alpha": 0.41, "metric": "nominal", "per_part": {}, "n_items": 1},
                   "workers": [{"worker": bob_worker.pk, "name": "bob", "votes": 1, "agreement_with_consensus": 0.75,
                                "median_seconds": 2.0, "reliability": 0.9}],
                   "label_distribution": {"majority": {"good": 1}}, "seed_figures": {"good_shares": {"1+": 1.0}}}
    setup.save()
    Membership.objects.filter(campaign=setup, worker=bob_worker).update(reliability=0.9, gold_seen=4,
                                                                         gold_correct=3)
    api.force_authenticate(alice)
    body = api.get(f"/api/campaigns/{setup.pk}/agreement/").json()
    assert body["agreement"]["alpha"] == 0.41 and body["workers"][0]["worker"] == bob_worker.pk
    assert body["seed_figures"]["good_shares"]["1+"] == 1.0
    workers = {w["name"]: w for w in api.get(f"/api/campaigns/{setup.pk}/workers/").json()["results"]}
    assert workers["bob"]["gold_accuracy"] == 0.75 and workers["bob"]["reliability"] == 0.9
    assert workers["bob"]["agreement_with_consensus"] == 0.75 and workers["bob"]["median_seconds"] == 2.0
    assert workers["erin0"]["agreement_with_consensus"] is None and workers["erin0"]["votes"] == 1


def test_post_aggregate_queues_the_celery_task(api, alice, setup, monkeypatch):
    calls = []

    def fake_delay(campaign_id):
        calls.append(campaign_id)
        return type("Result", (), {"id": "task-123"})()

    monkeypatch.setattr(annotation_tasks.aggregate_campaign, "delay", fake_delay)
    api.force_authenticate(alice)
    response = api.post(f"/api/campaigns/{setup.pk}/aggregate/")
    assert response.status_code == 202 and response.json() == {"queued": True, "task_id": "task-123"}
    assert calls == [setup.pk]

    def broken(campaign_id):
        raise OperationalError("Connection refused")

    monkeypatch.setattr(annotation_tasks.aggregate_campaign, "delay", broken)
    response = api.post(f"/api/campaigns/{setup.pk}/aggregate/")
    assert response.status_code == 503 and "manage.py campaign aggregate" in response.json()["detail"]


def test_gold_answers_are_set_and_listed_by_curators(api, alice, setup, make_campaign):
    campaign = setup
    api.force_authenticate(alice)
    url = f"/api/campaigns/{campaign.pk}/gold/"
    free = campaign.tasks.filter(votes_count=0).first()
    response = api.post(url, {"task": free.pk, "role": "qualification", "value": "bad", "feedback": "blurry"},
                        format="json")
    assert response.status_code == 201, response.content
    assert response.json()["role"] == "qualification" and response.json()["value"] == {"label": "bad"}
    assert Task.objects.get(pk=free.pk).role == "qualification"
    assert api.get(url, {"role": "qualification"}).json()["count"] == 1
    voted = campaign.tasks.filter(votes_count__gt=0).first()
    other = make_campaign("quality", name="other").tasks.first()
    for body, field, message in [
        ({"task": voted.pk, "role": "gold", "value": "good"}, "task", "already has votes"),
        ({"task": other.pk, "role": "gold", "value": "good"}, "task", "No such task in this campaign."),
        ({"task": free.pk, "role": "gold", "value": "maybe"}, "value", "choices"),
        ({"task": free.pk, "role": "real", "value": "good"}, "role", "gold, training or qualification"),
        ({"task": free.pk, "role": "teacher", "value": "good"}, "role", "not a valid choice"),
    ]:
        response = api.post(url, body, format="json")
        assert response.status_code == 400, body
        assert message in json.dumps(response.json()[field]), (body, response.json())


def test_the_schema_documents_the_campaign_endpoints(api, alice):
    api.force_authenticate(alice)
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/api/campaigns/", "/api/campaigns/{id}/votes/{vote_id}/", "/api/campaigns/{id}/workers/{worker_id}/block/",
                 "/api/campaigns/{id}/gold/", "/api/campaigns/{id}/agreement/"):
        assert path in paths, path


def test_admins_without_the_curator_group_manage_too(api, setup, django_user_model):
    root = django_user_model.objects.create_superuser(username="root", password="root-pw-123")
    api.force_authenticate(root)
    assert api.get(f"/api/campaigns/{setup.pk}/tasks/").status_code == 200
    assert Group.objects.filter(name=roles.CURATOR, user=root).count() == 0


def test_nested_lists_need_a_fixed_number_of_queries(api, alice, make_campaign, django_user_model,
                                                     django_assert_max_num_queries):
    """No N+1: listing 36 votes, 12 tasks and 3 workers costs the same few queries as listing one."""
    users = make_annotators(django_user_model, 3)
    campaign = make_campaign("quality", members=users, votes_per_item=3)
    for user in users:
        for _ in range(12):
            _vote(campaign, user, "good")
    for vote in Vote.objects.filter(campaign=campaign)[:5]:
        routing.edit_vote(campaign, vote.worker, vote.pk, "bad")
    for task in campaign.tasks.all():
        Aggregate.objects.create(task=task, method="majority", label="good", n_votes=3)
    api.force_authenticate(alice)
    for suffix, count in (("votes/", 36), ("tasks/", 12), ("workers/", 3), ("aggregates/", 12)):
        with django_assert_max_num_queries(10):
            body = api.get(f"/api/campaigns/{campaign.pk}/{suffix}").json()
        assert body["count"] == count, suffix
    api.force_authenticate(users[0])
    with django_assert_max_num_queries(10):
        assert api.get(f"/api/campaigns/{campaign.pk}/votes/").json()["count"] == 12
