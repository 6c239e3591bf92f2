"""The Prolific adapter against a local HTTP server (http.server in a thread) that answers like
Prolific's API: launch creates and publishes a study, pause / extend / finish transition it, the
submissions come back through the API, approval / rejection / bonus calls are made once."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, LedgerEntry
from annotation.providers import linkout_files, money
from annotation.providers.base import ProviderError
from annotation.providers.prolific import ProlificClient

pytestmark = pytest.mark.django_db
TOKEN = "test-token-123"


class FakeProlific:
    """Prolific's API shape: studies, transitions, submissions, bulk approve, bonus payments."""

    def __init__(self):
        self.calls, self.studies, self.submissions, self.bonuses = [], {}, {}, {}
        self.fail_next = None

    def handle(self, method, path, body, auth):
        self.calls.append((method, path, body))
        if auth != f"Token {TOKEN}":
            return 401, {"error": "Invalid token"}
        if self.fail_next:
            status, self.fail_next = self.fail_next, None
            return status, {"error": "busy"}
        parts = [p for p in path.split("?")[0].split("/") if p][2:]  # after api/v1
        if method == "POST" and parts == ["studies"]:
            study_id = f"study{len(self.studies) + 1:020d}"
            self.studies[study_id] = {**body, "id": study_id, "status": "UNPUBLISHED"}
            return 201, self.studies[study_id]
        if parts[:1] == ["studies"] and len(parts) == 3 and parts[2] == "transition":
            study = self.studies[parts[1]]
            study["status"] = {"PUBLISH": "ACTIVE", "START": "ACTIVE", "PAUSE": "PAUSED", "STOP": "COMPLETED"}[body["action"]]
            return 200, study
        if method == "PATCH" and parts[:1] == ["studies"]:
            self.studies[parts[1]].update(body)
            return 200, self.studies[parts[1]]
        if parts[:1] == ["studies"] and parts[2:] == ["submissions"]:
            return 200, {"results": [s for s in self.submissions.values() if s["study_id"] == parts[1]],
                         "_links": {"next": {"href": None}}}
        if parts[:1] == ["submissions"] and parts[2:] == ["transition"]:
            sub = self.submissions[parts[1]]
            target = "APPROVED" if body["action"] == "APPROVE" else "REJECTED"
            if sub["status"] == target:
                return 400, {"error": {"detail": f"Submission is already {target.lower()}"}}
            sub["status"] = target
            return 200, sub
        if parts == ["submissions", "bonus-payments"]:
            bonus_id = f"bonus{len(self.bonuses) + 1}"
            self.bonuses[bonus_id] = {"id": bonus_id, "csv": body["csv_bonuses"], "paid": False}
            return 201, self.bonuses[bonus_id]
        if parts[:1] == ["bulk-bonus-payments"] and parts[2:] == ["pay"]:
            self.bonuses[parts[1]]["paid"] = True
            return 202, {}
        return 404, {"error": "not found"}


@pytest.fixture
def prolific(settings):
    fake = FakeProlific()

    class Handler(BaseHTTPRequestHandler):
        def _do(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, answer = fake.handle(self.command, self.path, body, self.headers.get("Authorization"))
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _do

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.PROLIFIC_API_URL = f"http://127.0.0.1:{server.server_port}"
    settings.PROLIFIC_API_TOKEN = TOKEN
    settings.PUBLIC_BASE_URL = "https://captionlab.example.org"
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def campaign(make_campaign, settings):
    settings.LINKOUT_FEE_RATE = 0.33
    c = make_campaign("fluency", backend="linkout", status="draft", reward_cents=200, budget_cents=2000,
                      votes_per_item=2, name="Prolific API study")
    c.provider_config = {"api": "prolific", "completion_code": "APICODE1", "places": 3, "tasks_per_assignment": 2,
                         "completion_url": "https://app.prolific.com/submissions/complete?cc={code}"}
    c.save()
    return c


def work(campaign, pid, session):
    client = Client()
    client.get(f"{reverse('linkout-start', args=[campaign.public_token])}?PROLIFIC_PID={pid}"
               f"&STUDY_ID={campaign.provider_config['study_id']}&SESSION_ID={session}")
    client.post(reverse("linkout-consent", args=[campaign.public_token]), {"consent": "yes"})
    for _ in range(2):
        page = client.get(reverse("annotate", args=[campaign.pk])).content.decode()
        task = page.split('name="task" value="')[1].split('"')[0]
        client.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task, "label": "fluent"})
    assert "APICODE1" in client.post(reverse("external-finish", args=[campaign.pk])).content.decode()


def test_launch_sync_approve_reject_bonus_through_the_api(prolific, campaign, alice_client):
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    assert response.status_code == 302
    campaign.refresh_from_db()
    (study_id, study), = prolific.studies.items()
    assert study["status"] == "ACTIVE" and study["total_available_places"] == 3 and study["reward"] == 200
    assert study["completion_codes"][0]["code"] == "APICODE1"
    assert study["external_study_url"].startswith(
        f"https://captionlab.example.org/x/{campaign.public_token}/start?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}")
    assert campaign.provider_config["study_id"] == study_id
    assert campaign.provider_jobs.get().external_id == study_id

    work(campaign, "aaaaaaaaaaaaaaaaaaaaaaa1", "sub1")
    work(campaign, "aaaaaaaaaaaaaaaaaaaaaaa2", "sub2")
    prolific.submissions = {
        "sub1": {"id": "sub1", "participant_id": "aaaaaaaaaaaaaaaaaaaaaaa1", "status": "AWAITING REVIEW",
                 "study_code": "APICODE1", "study_id": study_id},
        "sub2": {"id": "sub2", "participant_id": "aaaaaaaaaaaaaaaaaaaaaaa2", "status": "RETURNED",
                 "study_code": "", "study_id": study_id},
    }
    report = linkout_files.sync_api(campaign)
    assert (report["confirmed"], report["expired"]) == (1, 1)
    a1 = Assignment.objects.get(worker__external_id="aaaaaaaaaaaaaaaaaaaaaaa1")
    a2 = Assignment.objects.get(worker__external_id="aaaaaaaaaaaaaaaaaaaaaaa2")
    assert a1.confirmed and a1.provider_assignment_id == "sub1" and a2.state == "expired"
    assert linkout_files.sync_api(campaign)["unchanged"] == 2  # idempotent

    url = reverse("provider-assignment", args=[campaign.pk, a1.pk, "approve"])
    assert alice_client.post(url, {"feedback": "good"}).status_code == 302
    assert alice_client.post(url, {"feedback": "good"}).status_code == 302
    approvals = [c for c in prolific.calls if c[1] == "/api/v1/submissions/sub1/transition/"]
    assert len(approvals) == 1 and approvals[0][2] == {"action": "APPROVE"}
    assert prolific.submissions["sub1"]["status"] == "APPROVED"

    bonus = reverse("provider-assignment", args=[campaign.pk, a1.pk, "bonus"])
    for _ in range(2):
        alice_client.post(bonus, {"amount": "1.25", "feedback": "thorough", "token": "t1"})
    assert list(prolific.bonuses.values()) == [{"id": "bonus1", "csv": "aaaaaaaaaaaaaaaaaaaaaaa1,1.25", "paid": True}]
    s = money.summary(campaign)
    assert s["rewards"] == 200 and s["bonuses"] == 125 and s["fees"] == 66 + 41

    # pause, extend, finish go through the API
    alice_client.post(reverse("provider-action", args=[campaign.pk, "pause"]))
    assert prolific.studies[study_id]["status"] == "PAUSED"
    alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    assert prolific.studies[study_id]["status"] == "ACTIVE"
    alice_client.post(reverse("provider-action", args=[campaign.pk, "extend"]), {"extra_assignments": "2"})
    assert prolific.studies[study_id]["total_available_places"] == 5
    alice_client.post(reverse("provider-action", args=[campaign.pk, "finish"]))
    assert prolific.studies[study_id]["status"] == "COMPLETED"
    assert money.summary(campaign)["committed"] == 0


def test_missing_or_wrong_token_launches_nothing(prolific, campaign, alice_client, settings):
    settings.PROLIFIC_API_TOKEN = ""
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    assert response.status_code == 409 and "PROLIFIC_API_TOKEN" in response.content.decode()
    settings.PROLIFIC_API_TOKEN = "wrong"
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    assert response.status_code == 409 and "refused the API token" in response.content.decode()
    campaign.refresh_from_db()
    assert campaign.status == "draft" and not campaign.public_token
    assert not LedgerEntry.objects.exists() and not campaign.provider_jobs.exists()


def test_client_errors_are_provider_errors(prolific):
    client = ProlificClient()
    prolific.fail_next = 429
    with pytest.raises(ProviderError) as err:
        client.list_submissions("x")
    assert err.value.retryable and err.value.code == "throttled"
    with pytest.raises(ProviderError) as err:
        ProlificClient(base_url="http://127.0.0.1:9").list_submissions("x")
    assert err.value.code == "network" and err.value.retryable
