"""The MTurk ExternalQuestion page: preview, refusals of bad ids and submit addresses, framing
only for MTurk's origins, and the final auto-submitting form (also on a replayed finish)."""
import pytest
from django.test import Client
from django.urls import reverse

from annotation import routing
from annotation.models import Assignment, Campaign
from annotation.providers.mturk.frame import valid_submit_to


def test_preview_shows_an_example_and_refuses_a_submission(published):
    campaign, job = published
    url = reverse("mturk-task", args=[campaign.pk])
    client = Client()
    preview = client.get(url, {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": job.external_id})
    assert preview.status_code == 200 and b"Accept the HIT to start" in preview.content
    example = campaign.tasks.order_by("position", "pk").first()
    assert example.caption.text.encode() in preview.content
    assert "X-Frame-Options" not in preview
    assert preview["Content-Security-Policy"] == ("frame-ancestors https://*.mturk.com https://mturk.com "
                                                  "https://workersandbox.mturk.com")
    refused = client.post(url, {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"})
    assert refused.status_code == 409 and b"Nothing was recorded" in refused.content
    assert not Assignment.objects.filter(campaign=campaign).exists()
    assert client.get(reverse("login"))["X-Frame-Options"] == "DENY"  # every other page stays unframable


@pytest.mark.parametrize("params, status, message", [
    ({"hitId": "NOTAHIT"}, 400, b"not one of this campaign"),
    ({"turkSubmitTo": "https://evil.example.com"}, 400, b"not an MTurk address"),
    ({"turkSubmitTo": "https://www.mturk.com.evil.example"}, 400, b"not an MTurk address"),
    ({"workerId": "<script>"}, 400, b"needs MTurk&#x27;s workerId"),
    ({"workerId": ""}, 400, b"needs MTurk&#x27;s workerId"),
])
def test_bad_ids_and_submit_addresses_record_nothing(published, fake, params, status, message):
    campaign, job = published
    query = {"assignmentId": "3ASSIGNMENT", "hitId": job.external_id, "workerId": "AW1", "turkSubmitTo": fake.url,
             **params}
    response = Client().get(reverse("mturk-task", args=[campaign.pk]), query)
    assert response.status_code == status and message in response.content
    assert b"<script>" not in response.content
    assert not Assignment.objects.filter(campaign=campaign).exists()


def test_submit_addresses(settings):
    settings.DEBUG, settings.MTURK_ALLOW_LOCAL_SUBMIT = False, False
    assert valid_submit_to("https://www.mturk.com") == "https://www.mturk.com"
    assert valid_submit_to("https://workersandbox.mturk.com/") == "https://workersandbox.mturk.com"
    assert valid_submit_to("http://127.0.0.1:8000") is None
    settings.MTURK_ALLOW_LOCAL_SUBMIT = True
    assert valid_submit_to("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert valid_submit_to("http://127.0.0.1:8000/x") is None
    assert valid_submit_to("http://example.com") is None


def test_finish_posts_to_turk_submit_to_and_a_replay_is_harmless(published, fake):
    campaign, job = published
    client = Client()
    assignment_id = fake.accept(job.external_id, "AWORKER")
    url = reverse("mturk-task", args=[campaign.pk])
    params = {"assignmentId": assignment_id, "hitId": job.external_id, "workerId": "AWORKER",
              "turkSubmitTo": fake.url}
    assert client.get(url, params).status_code == 302
    assignment = Assignment.objects.get(provider_assignment_id=assignment_id)
    campaign = Campaign.objects.get(pk=campaign.pk)
    for _ in range(2):
        served = routing.next_task(campaign, assignment.worker)
        routing.submit_vote(campaign, assignment.worker, served.task.pk, {"label": "fluent"}, seconds=3)
    finish = client.post(reverse("external-finish", args=[campaign.pk]))
    assert finish.status_code == 200
    html = finish.content.decode()
    assert f'action="{fake.url}/mturk/externalSubmit"' in html
    assert f'name="assignmentId" value="{assignment_id}"' in html
    assert "frame-ancestors" in finish["Content-Security-Policy"]
    assignment.refresh_from_db()
    submitted_at = assignment.submitted_at
    assert assignment.state == "submitted" and submitted_at is not None
    # a replayed finish (or reopening the HIT) gives the same form; one submit is recorded
    again = client.post(reverse("external-finish", args=[campaign.pk]))
    assert again.status_code == 200 and f'value="{assignment_id}"' in again.content.decode()
    reopened = client.get(url, params)
    assert reopened.status_code == 200 and b"/mturk/externalSubmit" in reopened.content
    assignment.refresh_from_db()
    assert assignment.submitted_at == submitted_at
    assert Assignment.objects.filter(provider_assignment_id=assignment_id).count() == 1
    # a second worker id from the same browser is refused
    other = fake.accept(job.external_id, "ASECONDID")
    refused = client.get(url, {**params, "assignmentId": other, "workerId": "ASECONDID"})
    assert refused.status_code == 409 and b"another participant id" in refused.content
