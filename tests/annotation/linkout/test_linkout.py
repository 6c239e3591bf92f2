"""The link-out flow through the test client: launch, start with the marketplace's ids, consent,
training, tasks, completion code and redirect; junk and second ids refused; approvals CSV out and
the marketplace's status CSV back in (confirms, idempotent); the money on the ledger."""
import io
import re

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from PIL import Image as PILImage

from annotation.models import Assignment, LedgerEntry, Vote
from annotation.providers import money
from curation.models import Image

from .conftest import URL

pytestmark = pytest.mark.django_db

def launch(alice_client, campaign):
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    assert response.status_code == 302, response.content.decode()[:2000]
    campaign.refresh_from_db()
    return campaign


def task_id(response) -> int:
    match = re.search(r'name="task" value="(\d+)"', response.content.decode())
    assert match, response.content.decode()[:3000]
    return int(match.group(1))


def start_url(campaign, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{reverse('linkout-start', args=[campaign.public_token])}?{query}"


def do_study(client, campaign, pid, session="SESS1"):
    response = client.get(start_url(campaign, PROLIFIC_PID=pid, STUDY_ID="STUDY1", SESSION_ID=session))
    assert response.status_code == 302 and response["Location"] == reverse("linkout-consent",
                                                                          args=[campaign.public_token])
    work = reverse("annotate", args=[campaign.pk])
    # no work before consent
    assert client.get(work)["Location"] == reverse("linkout-consent", args=[campaign.public_token])
    page = client.get(response["Location"])
    assert "<strong>ratings</strong>" in page.content.decode() and pid in page.content.decode()
    assert client.post(response["Location"], {"consent": "yes"})["Location"] == work
    page = client.get(work)
    assert page.status_code == 200 and 'data-stage="training"' in page.content.decode()
    response = client.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task_id(page), "label": "fluent"})
    assert "feedback=" in response["Location"]
    assert "A plain, correct sentence." in client.get(response["Location"]).content.decode()
    for _ in range(3):
        page = client.get(work)
        assert 'data-stage="work"' in page.content.decode()
        client.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task_id(page), "label": "fluent"})
    page = client.get(work)
    assert 'data-role="finish"' in page.content.decode()
    return client.post(reverse("external-finish", args=[campaign.pk]))


def test_the_whole_link_out_flow(campaign, alice_client):
    campaign = launch(alice_client, campaign)
    assert campaign.status == "running" and len(campaign.public_token) >= 24
    s = money.summary(campaign)
    assert s["committed"] == 3 * 150 + 225 and s["spent"] == 0  # places x reward + 50% fee

    participant = Client()
    done = do_study(participant, campaign, "5f1e2d3c4b5a69788796a5b4")
    body = done.content.decode()
    assert done.status_code == 200 and "C0DE1234" in body
    assert "https://app.prolific.com/submissions/complete?cc=C0DE1234" in body
    assignment = Assignment.objects.get(campaign=campaign)
    assert assignment.state == "submitted" and assignment.completion_code == "C0DE1234"
    assert not assignment.confirmed
    votes = Vote.objects.filter(assignment=assignment, role="real")
    assert votes.count() == 3 and all(v.quarantined for v in votes)
    assert sum(campaign.tasks.filter(role="real").values_list("votes_count", flat=True)) == 0
    # a replayed finish shows the same end and changes nothing
    again = participant.post(reverse("external-finish", args=[campaign.pk]))
    assert "C0DE1234" in again.content.decode()
    # coming back to the work page after finishing goes to the end page
    assert participant.get(reverse("annotate", args=[campaign.pk]))["Location"] == reverse(
        "external-finish", args=[campaign.pk])

    # the curator approves: votes count, the reward is paid once
    page = alice_client.get(reverse("campaign-provider", args=[campaign.pk]))
    assert page.status_code == 200 and "5f1e2d3c4b5a69788796a5b4" in page.content.decode()
    url = reverse("provider-assignment", args=[campaign.pk, assignment.pk, "approve"])
    assert alice_client.post(url, {"feedback": "Thanks!"}).status_code == 302
    assert alice_client.post(url, {"feedback": "Thanks!"}).status_code == 302  # idempotent
    assignment.refresh_from_db()
    assert assignment.state == "approved" and assignment.confirmed and assignment.feedback == "Thanks!"
    assert not Vote.objects.filter(assignment=assignment, quarantined=True).exists()
    assert sum(campaign.tasks.filter(role="real").values_list("votes_count", flat=True)) == 3
    s = money.summary(campaign)
    assert (s["spent"], s["committed"]) == (225, 450) and s["accepted_votes"] == 3 and s["cost_per_vote"] == 75.0

    export = alice_client.get(reverse("provider-export", args=[campaign.pk, "approvals"]))
    assert export.status_code == 200 and export.content.decode() == "5f1e2d3c4b5a69788796a5b4\n"

    # a bonus, paid once; the bonus CSV in Prolific's layout
    bonus = reverse("provider-assignment", args=[campaign.pk, assignment.pk, "bonus"])
    assert alice_client.post(bonus, {"amount": "0.40", "feedback": "careful work", "token": "b1"}).status_code == 302
    assert alice_client.post(bonus, {"amount": "0.40", "feedback": "careful work", "token": "b1"}).status_code == 302
    assert LedgerEntry.objects.filter(kind="bonus").count() == 1
    assert alice_client.get(reverse("provider-export", args=[campaign.pk, "bonuses"])).content.decode() == \
        "5f1e2d3c4b5a69788796a5b4,0.40\n"
    # past the budget: refused with a message, nothing written
    response = alice_client.post(bonus, {"amount": "9.00", "feedback": "too much", "token": "b2"})
    assert response.status_code == 409 and "Over budget" in response.content.decode()
    assert LedgerEntry.objects.filter(kind="bonus").count() == 1

    # the dashboard shows the same figures
    dash = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert 'data-role="cost-spent">2.85<' in dash and reverse("campaign-provider", args=[campaign.pk]) in dash


def test_junk_and_missing_ids_are_refused(campaign, alice_client):
    campaign = launch(alice_client, campaign)
    client = Client()
    for pid in ("<script>alert(1)</script>", "a" * 65, "abc def", "x;DROP"):
        response = client.get(reverse("linkout-start", args=[campaign.public_token]), {"PROLIFIC_PID": pid})
        assert response.status_code == 400, pid
        assert "<script>alert(1)</script>" not in response.content.decode()
    assert client.get(reverse("linkout-start", args=[campaign.public_token])).status_code == 400
    response = client.get(reverse("linkout-start", args=[campaign.public_token]),
                          {"PROLIFIC_PID": "okid", "SESSION_ID": "bad id!"})
    assert response.status_code == 400
    assert client.get(reverse("linkout-start", args=["nope" * 5]), {"PROLIFIC_PID": "x"}).status_code == 404
    assert not Assignment.objects.exists()
    # work pages without a session: the login, no votes
    assert client.get(reverse("annotate", args=[campaign.pk])).status_code == 302
    assert client.post(reverse("external-finish", args=[campaign.pk])).status_code == 403


def test_a_second_participant_id_from_the_same_browser_is_refused(campaign, alice_client):
    campaign = launch(alice_client, campaign)
    client = Client()
    assert client.get(start_url(campaign, PROLIFIC_PID="first1")).status_code == 302
    response = client.get(start_url(campaign, PROLIFIC_PID="second2"))
    assert response.status_code == 409 and "another participant id" in response.content.decode()
    assert Assignment.objects.filter(campaign=campaign).count() == 1


def test_paused_study_and_custom_parameter_names(campaign, alice_client):
    campaign.provider_config = {**campaign.provider_config, "participant_param": "workerId"}
    campaign.save()
    campaign = launch(alice_client, campaign)
    client = Client()
    assert client.get(start_url(campaign, workerId="w-1"))["Location"].endswith("/consent")
    alice_client.post(reverse("provider-action", args=[campaign.pk, "pause"]))
    response = Client().get(start_url(campaign, workerId="w-2"))
    assert response.status_code == 409 and "paused" in response.content.decode()


def test_launch_refused_with_bad_settings_or_budget_leaves_nothing(campaign, alice_client):
    campaign.provider_config = {**campaign.provider_config, "completion_url": "http://insecure.example/done"}
    campaign.save()
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    assert response.status_code == 409 and "https://" in response.content.decode()
    campaign.provider_config = {**campaign.provider_config, "completion_url": URL, "places": 10}
    campaign.save()
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    assert response.status_code == 409 and "Over budget" in response.content.decode()
    campaign.refresh_from_db()
    assert campaign.status == "draft" and not campaign.public_token
    assert not LedgerEntry.objects.exists() and not campaign.provider_jobs.exists()
    # the settings form validates too
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "settings"]),
                                 {"completion_url": "javascript:alert(1)", "places": "3", "reward": "1.50",
                                  "budget": "10"})
    assert response.status_code == 400 and "https://" in response.content.decode()


def test_provider_pages_need_the_curator_role(campaign, bob):
    bob_client = Client()
    bob_client.force_login(bob)
    assert bob_client.get(reverse("campaign-provider", args=[campaign.pk])).status_code == 403
    assert bob_client.post(reverse("provider-action", args=[campaign.pk, "launch"])).status_code == 403
    assert bob_client.get(reverse("provider-export", args=[campaign.pk, "approvals"])).status_code == 403
    assert Client().get(reverse("campaign-provider", args=[campaign.pk])).status_code == 302


def test_status_import_confirms_approves_and_is_idempotent(campaign, alice_client):
    campaign = launch(alice_client, campaign)
    pids = ["aaaaaaaaaaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaaaaaaaaaa2", "aaaaaaaaaaaaaaaaaaaaaaa3"]
    for n, pid in enumerate(pids):
        assert do_study(Client(), campaign, pid, session=f"S{n}").status_code == 200
    csv_text = ("Submission id,Participant id,Status,Started at,Completed at,Completion code\n"
                f"S0,{pids[0]},APPROVED,2026-05-01,2026-05-01,C0DE1234\n"
                f"S1,{pids[1]},REJECTED,2026-05-01,2026-05-01,C0DE1234\n"
                f"S2,{pids[2]},AWAITING REVIEW,2026-05-01,2026-05-01,C0DE1234\n"
                "S9,nobody00000000000000000,APPROVED,2026-05-01,2026-05-01,C0DE1234\n"
                "S8,<bad>,APPROVED,,,\n")
    upload = SimpleUploadedFile("prolific.csv", csv_text.encode(), content_type="text/csv")
    response = alice_client.post(reverse("provider-import", args=[campaign.pk]), {"file": upload})
    body = response.content.decode()
    assert response.status_code == 200, body[:2000]
    assert "1 approved, 1 rejected, 1 confirmed" in body and "line 5" in body and "line 6" in body
    states = {a.worker.external_id: (a.state, a.confirmed) for a in Assignment.objects.select_related("worker")}
    assert states == {pids[0]: ("approved", True), pids[1]: ("rejected", False), pids[2]: ("submitted", True)}
    assert Vote.objects.filter(assignment__worker__external_id=pids[1], role="real", quarantined=True).count() == 3
    counted = sum(campaign.tasks.filter(role="real").values_list("votes_count", flat=True))
    paid = money.summary(campaign)["spent"]
    assert counted == 6 and paid == 225

    upload = SimpleUploadedFile("prolific.csv", csv_text.encode(), content_type="text/csv")
    body = alice_client.post(reverse("provider-import", args=[campaign.pk]), {"file": upload}).content.decode()
    assert "0 approved, 0 rejected, 0 confirmed" in body and "3 unchanged" in body
    assert sum(campaign.tasks.filter(role="real").values_list("votes_count", flat=True)) == counted
    assert money.summary(campaign)["spent"] == paid
    # a bare list of ids (Prolific's bulk approve) approves the confirmed one
    upload = SimpleUploadedFile("ids.csv", f"{pids[2]}\n".encode(), content_type="text/csv")
    alice_client.post(reverse("provider-import", args=[campaign.pk]), {"file": upload})
    assert Assignment.objects.get(worker__external_id=pids[2]).state == "approved"
    assert money.summary(campaign)["spent"] == 450
    # a wrong completion code is reported, not confirmed
    junk = SimpleUploadedFile("x.csv", b"no,columns\n1,2\n", content_type="text/csv")
    assert alice_client.post(reverse("provider-import", args=[campaign.pk]), {"file": junk}).status_code == 400


def test_finish_releases_the_unused_commitment(campaign, alice_client):
    campaign = launch(alice_client, campaign)
    assert alice_client.post(reverse("provider-action", args=[campaign.pk, "extend"]),
                             {"extra_assignments": "1"}).status_code == 302
    campaign.refresh_from_db()
    assert campaign.provider_config["places"] == 4 and money.summary(campaign)["committed"] == 4 * 225
    assert alice_client.post(reverse("provider-action", args=[campaign.pk, "extend"]),
                             {"extra_assignments": "5"}).status_code == 409  # over budget
    alice_client.post(reverse("provider-action", args=[campaign.pk, "finish"]))
    campaign.refresh_from_db()
    s = money.summary(campaign)
    assert campaign.status == "finished" and s["committed"] == 0 and s["remaining"] == 1000


def test_external_workers_see_only_their_campaigns_images(campaign, alice_client):
    campaign = launch(alice_client, campaign)
    client = Client()
    client.get(start_url(campaign, PROLIFIC_PID="viewer1"))
    client.post(reverse("linkout-consent", args=[campaign.public_token]), {"consent": "yes"})
    page = client.get(reverse("annotate", args=[campaign.pk])).content.decode()
    src = re.search(r'<img src="([^"]+)"', page).group(1)
    image_id = int(src.rstrip("/").split("/")[-1])
    assert src == reverse("external-image", args=[campaign.pk, image_id])
    image = Image.objects.get(pk=image_id)
    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 8), (200, 30, 30)).save(buffer, format="JPEG")
    image.file.save(f"{image.pk}.jpg", ContentFile(buffer.getvalue()), save=False)
    image.format = "JPEG"
    image.save()
    response = client.get(src)
    assert response.status_code == 200 and response["Content-Type"] == "image/jpeg"
    assert Client().get(src).status_code == 404  # a browser without the session
    other = campaign.collection.images.exclude(pk__in=campaign.tasks.values("image_id")).first()
    if other is not None:
        assert client.get(reverse("external-image", args=[campaign.pk, other.pk])).status_code == 404
    # declining the consent records nothing more
    declined = Client()
    declined.get(start_url(campaign, PROLIFIC_PID="decliner"))
    body = declined.post(reverse("linkout-consent", args=[campaign.public_token]), {"consent": "no"}).content.decode()
    assert "return the study" in body
    assert declined.get(reverse("annotate", args=[campaign.pk]))["Location"].endswith("/consent")


def test_mturk_launch_from_the_provider_page_shows_a_refusal(make_campaign, alice_client, eager_celery, monkeypatch,
                                                             settings):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    settings.PUBLIC_BASE_URL = "https://captionlab.example.org"
    campaign = make_campaign("fluency", backend="mturk", status="draft", reward_cents=10, budget_cents=1000)
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]))
    page = alice_client.get(reverse("campaign-provider", args=[campaign.pk])) if response.status_code == 302 else response
    body = page.content.decode()
    assert 'data-state="failed"' in body or 'data-role="provider-error"' in body, body[:3000]
    campaign.refresh_from_db()
    assert campaign.status == "draft" and not LedgerEntry.objects.filter(state="paid").exists()
