"""Inside MTurk's frame the platform is a third party: the cookies its framable pages set carry
SameSite=None; Secure, or the browser would drop the session between the entry page and the work
page. Every other page keeps SameSite=Lax. Replayed MTurk ids from another browser are refused."""
from django.test import Client
from django.urls import reverse


def _entry(client, campaign, job, fake, worker="AFRAMEWORKER"):
    assignment_id = fake.accept(job.external_id, worker)
    params = {"assignmentId": assignment_id, "hitId": job.external_id, "workerId": worker, "turkSubmitTo": fake.url}
    return client.get(reverse("mturk-task", args=[campaign.pk]), params), params


def test_the_framed_entry_sets_a_session_cookie_a_third_party_frame_keeps(published, fake):
    campaign, job = published
    client = Client()
    response, _params = _entry(client, campaign, job, fake)
    assert response.status_code == 302
    cookie = response.cookies["sessionid"]
    assert cookie["samesite"] == "None" and cookie["secure"]
    work = client.get(response["Location"])  # the framed work page, with that session
    assert work.status_code == 200 and 'name="task"' in work.content.decode()
    assert "X-Frame-Options" not in work and "frame-ancestors" in work["Content-Security-Policy"]
    csrf = work.cookies.get("csrftoken")
    if csrf is not None:
        assert csrf["samesite"] == "None" and csrf["secure"]


def test_ordinary_pages_keep_lax_cookies(alice, client):
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-pw-123"})
    assert response.status_code == 302
    assert response.cookies["sessionid"]["samesite"] == "Lax"


def test_mturk_ids_replayed_from_another_browser_are_refused(published, fake):
    campaign, job = published
    first = Client()
    response, params = _entry(first, campaign, job, fake, worker="AREPLAYED")
    assert response.status_code == 302
    refused = Client().get(reverse("mturk-task", args=[campaign.pk]), params)
    assert refused.status_code == 409 and "another browser" in refused.content.decode()
    assert first.get(reverse("mturk-task", args=[campaign.pk]), params).status_code == 302
