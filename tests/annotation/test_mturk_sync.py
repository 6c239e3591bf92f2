"""The MTurk provider against a local server that answers MTurk's JSON protocol
(tests/annotation/fake_mturk.py): boto3 runs its real serialization, signing and parsing.

A campaign is published through the Celery task, workers accept HITs and open the
ExternalQuestion page, vote (quarantined until confirmed), submit; the sync is interrupted right
after its first approval and resumed: every approval and bonus happens exactly once and the ledger
agrees with what the server paid; a forged assignment stays quarantined; throttling is retried;
missing or wrong credentials are a clear error with nothing published."""
from datetime import timedelta
from urllib.parse import urlencode
from urllib.request import Request, urlopen

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation import routing
from annotation.aggregation import load_votes
from annotation.models import Assignment, Campaign, LedgerEntry, ProviderJob, Vote
from annotation.providers import money
from annotation.providers.base import get_provider
from annotation.providers.mturk import MTurkProvider
from annotation.providers.sync import sync_campaign
from annotation.tasks_providers import provider_publish


def open_hit(campaign, fake, hit_id, worker_id, assignment_id=None):
    """The worker's browser opens the ExternalQuestion page after accepting the HIT."""
    client = Client()
    assignment_id = assignment_id or fake.accept(hit_id, worker_id)
    response = client.get(reverse("mturk-task", args=[campaign.pk]), {
        "assignmentId": assignment_id, "hitId": hit_id, "workerId": worker_id, "turkSubmitTo": fake.url})
    assert response.status_code == 302, response.content
    assert response["Location"] == reverse("annotate", args=[campaign.pk])
    assert "frame-ancestors https://*.mturk.com" in response["Content-Security-Policy"]
    return Assignment.objects.get(campaign=campaign, provider_assignment_id=assignment_id,
                                  worker__external_id=worker_id)


def work(campaign, assignment, n, seconds):
    campaign = Campaign.objects.get(pk=campaign.pk)
    for _ in range(n):
        served = routing.next_task(campaign, assignment.worker)
        assert served.task is not None, served.message
        routing.submit_vote(campaign, assignment.worker, served.task.pk, {"label": "fluent"}, seconds=seconds)


def finish(fake, assignment):
    """What external-finish and the auto-submitting form do: the votes are stored, the
    assignment is marked submitted, then MTurk gets the assignmentId."""
    Assignment.objects.filter(pk=assignment.pk).update(state="submitted", submitted_at=timezone.now())
    data = urlencode({"assignmentId": assignment.provider_assignment_id}).encode()
    with urlopen(Request(fake.url + "/mturk/externalSubmit", data=data)) as response:
        assert response.status == 200


def test_whole_sync_interrupted_and_resumed_pays_exactly_once(campaign, fake, eager_celery, monkeypatch):
    result = provider_publish.delay(campaign.pk).get()
    assert result["state"] == "done", result
    jobs = list(ProviderJob.objects.filter(campaign=campaign).order_by("pk"))
    assert [j.status for j in jobs] == ["published", "published"] and all(j.external_id in fake.hits for j in jobs)
    hit = fake.hits[jobs[0].external_id]
    assert f"<ExternalURL>https://captions.example.org/mturk/{campaign.pk}/</ExternalURL>" in hit["Question"]
    assert hit["Reward"] == "0.10" and hit["MaxAssignments"] == 2
    assert {q["QualificationTypeId"] for q in hit["QualificationRequirements"]} == {
        "000000000000000000L0", "00000000000000000071"}
    campaign.refresh_from_db()
    assert campaign.provider_config["publish_progress"]["done"] == 2

    # a forger makes up an assignment id on a real HIT: the page cannot know, the sync will
    forged = open_hit(campaign, fake, jobs[0].external_id, "AFORGER", assignment_id="3FORGEDASSIGNMENT0000000000000")
    work(campaign, forged, 1, seconds=5)
    finish_forged = Assignment.objects.filter(pk=forged.pk)
    finish_forged.update(state="submitted", submitted_at=timezone.now() - timedelta(hours=1))
    good = open_hit(campaign, fake, jobs[0].external_id, "AGOODWORKER")
    work(campaign, good, 2, seconds=6)
    hasty = open_hit(campaign, fake, jobs[1].external_id, "AHASTYWORKER")
    work(campaign, hasty, 1, seconds=0.2)
    # before the sync every vote is quarantined: nothing counted, aggregated or paid, but each
    # holds its item's slot, so no item gets more workers than it needs
    assert Vote.objects.filter(campaign=campaign, quarantined=True).count() == 4
    assert sum(campaign.tasks.values_list("votes_count", flat=True)) == 0
    assert sorted(campaign.tasks.values_list("reserved_count", flat=True)) == [1, 1, 1, 1]
    assert routing.next_task(campaign, hasty.worker).task is None
    assert load_votes(campaign).empty
    finish(fake, good)
    finish(fake, hasty)

    # the first sync dies right after MTurk accepted its first approval
    real_approve = MTurkProvider.approve

    def approve_then_crash(self, assignment, feedback=""):
        real_approve(self, assignment, feedback)
        raise RuntimeError("worker killed")

    monkeypatch.setattr(MTurkProvider, "approve", approve_then_crash)
    with pytest.raises(RuntimeError):
        sync_campaign(campaign)
    monkeypatch.setattr(MTurkProvider, "approve", real_approve)
    assert fake.assignments[good.provider_assignment_id]["AssignmentStatus"] == "Approved"
    good.refresh_from_db()
    assert good.state == "submitted" and good.confirmed  # MTurk approved, our state not yet moved

    fake.throttle(2)  # and MTurk throttles the resumed sync
    report = sync_campaign(campaign)
    # MTurk lists the good assignment as Approved now: the sync records it without approving again
    assert report["approved_upstream"] == 1 and "approved" not in report, report
    assert report["rejected"] == 1 and report["bonuses"] == 1, report
    assert fake.count("ApproveAssignment") == 1
    assert fake._throttle == 0 and "deleted" not in report  # the forger's item is open again

    good.refresh_from_db(), hasty.refresh_from_db(), forged.refresh_from_db()
    assert (good.state, hasty.state) == ("approved", "rejected")
    assert fake.assignments[hasty.provider_assignment_id]["RequesterFeedback"].startswith("Too fast.")
    assert fake.assignments[good.provider_assignment_id]["RequesterFeedback"] == "Thank you!"
    # the forged assignment: discarded, its vote quarantined for good
    assert forged.state == "rejected" and not forged.confirmed
    assert Vote.objects.get(assignment=forged).quarantined
    # the rejected (hasty) work is withdrawn: its votes are not evidence and its items reopen
    assert not Vote.objects.filter(assignment=good, quarantined=True).exists()
    assert not Vote.objects.filter(assignment=hasty, quarantined=False).exists()
    assert sorted(campaign.tasks.values_list("votes_count", "reserved_count")) == [(0, 0), (0, 0), (1, 0), (1, 0)]
    assert len(load_votes(campaign)) == 2

    # a third sync changes nothing: no second approval, no second bonus
    approvals, bonuses = fake.count("ApproveAssignment"), fake.count("SendBonus")
    sync_campaign(campaign)
    assert (fake.count("ApproveAssignment"), fake.count("SendBonus")) == (approvals, bonuses)
    assert len(fake.bonuses) == 1 and fake.bonuses[0]["UniqueRequestToken"] == f"mturk:{good.provider_assignment_id}:bonus"

    # the ledger equals what MTurk paid; MTurk's 20% fee on top
    paid = fake.paid_cents()
    assert paid == {"rewards": 10, "bonuses": 5, "total": 15}
    summary = money.summary(campaign)
    assert (summary["rewards"], summary["bonuses"]) == (paid["rewards"], paid["bonuses"])
    assert summary["fees"] == 2 + 1 and summary["spent"] == 18
    assert summary["committed"] > 0  # the HITs' unused rewards, until they are deleted
    # the curator finishes the campaign: HITs expire, the next sync deletes them
    get_provider("mturk").finish(campaign)
    assert sync_campaign(campaign)["deleted"] == 2
    assert money.summary(campaign)["committed"] == 0
    assert LedgerEntry.objects.filter(assignment=good, kind="reward", state="paid").count() == 1
    assert not LedgerEntry.objects.filter(assignment__in=[hasty, forged], state="paid").exists()
    assert fake.hits == {} and set(ProviderJob.objects.filter(campaign=campaign).values_list("status", flat=True)) == {
        "finished"}


def test_a_vote_of_a_mismatched_worker_never_counts(campaign, fake, eager_celery):
    provider_publish.delay(campaign.pk).get()
    job = ProviderJob.objects.filter(campaign=campaign).first()
    real = fake.accept(job.external_id, "AREALWORKER")
    fake.submit(real)
    # somebody else presents the real assignment id with their own worker id
    thief = open_hit(campaign, fake, job.external_id, "ATHIEF", assignment_id=real)
    work(campaign, thief, 1, seconds=4)
    report = sync_campaign(campaign)
    thief.refresh_from_db()
    assert report["discarded"] == 1 and not thief.confirmed
    assert Vote.objects.get(assignment=thief).quarantined
    assert sum(campaign.tasks.values_list("votes_count", flat=True)) == 0
    # the real worker submitted on MTurk without answering here: rejected, not paid
    assert fake.assignments[real]["AssignmentStatus"] == "Rejected"
    assert money.summary(campaign)["rewards"] == 0


def test_missing_credentials_publish_nothing(campaign, fake, eager_celery, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    result = provider_publish.delay(campaign.pk).get()
    assert result["state"] == "failed" and result["code"] == "credentials"
    assert "AWS_ACCESS_KEY_ID" in result["error"]
    campaign.refresh_from_db()
    assert campaign.provider_config["publish_progress"]["state"] == "failed"
    assert campaign.status == "draft"
    assert not ProviderJob.objects.filter(campaign=campaign).exists() and fake.count("CreateHIT") == 0
    assert not LedgerEntry.objects.filter(campaign=campaign).exists()


def test_wrong_credentials_publish_nothing(campaign, fake, eager_celery):
    fake.valid_keys = {"AKIDTHEREALONE"}
    result = provider_publish.delay(campaign.pk).get()
    assert result["code"] == "credentials" and "UnrecognizedClientException" in result["error"]
    assert not ProviderJob.objects.filter(campaign=campaign, status="published").exists()
    assert not LedgerEntry.objects.filter(campaign=campaign).exists() and fake.hits == {}


def test_throttled_hit_creation_is_retried_and_a_rerun_creates_no_second_hit(campaign, fake, eager_celery):
    fake.throttle(3, operations={"CreateHIT"})
    assert provider_publish.delay(campaign.pk).get()["state"] == "done"
    assert len(fake.hits) == 2
    # a retried batch (the job forgotten locally, e.g. a crash before the row was saved) finds its HIT
    job = ProviderJob.objects.filter(campaign=campaign).first()
    hit_id = job.external_id
    ProviderJob.objects.filter(pk=job.pk).update(status="pending", external_id="")
    provider = get_provider("mturk")
    provider.publish(Campaign.objects.get(pk=campaign.pk))
    assert len(fake.hits) == 2
    assert ProviderJob.objects.get(pk=job.pk).external_id == hit_id


def test_a_curator_launches_the_mturk_campaign_from_the_provider_page(campaign, fake, alice_client, eager_celery):
    """The launch button queues the publish task (eager here): HITs appear at the endpoint and on
    the page, and the campaign runs."""
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]), follow=True)
    assert response.status_code == 200
    assert fake.count("CreateHIT") + fake.count("CreateHITWithHITType") == 2
    jobs = list(ProviderJob.objects.filter(campaign=campaign).values_list("status", "external_id"))
    assert [status for status, _ in jobs] == ["published", "published"]
    page = alice_client.get(reverse("campaign-provider", args=[campaign.pk])).content.decode()
    for _, hit_id in jobs:
        assert hit_id in page
    assert Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.RUNNING


def test_launch_without_credentials_says_so_and_publishes_nothing(campaign, fake, alice_client, eager_celery,
                                                                   monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    response = alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"]), follow=True)
    assert "No AWS credentials for MTurk" in response.content.decode()
    assert not ProviderJob.objects.filter(campaign=campaign).exists()
    assert fake.count("CreateHIT") + fake.count("CreateHITWithHITType") == 0
