"""Every MTurk call the provider makes, checked by botocore's Stubber against the MTurk service
model shipped in botocore (operation names, parameter names, types and required fields), with the
exact parameters the provider must send."""
from datetime import datetime
from datetime import timezone as dt_timezone

import boto3
import pytest
from botocore.stub import ANY, Stubber

from annotation.models import Assignment, Campaign, LedgerEntry, Membership, ProviderJob, Task, Worker
from annotation.providers import money, sync
from annotation.providers.base import ProviderError
from annotation.providers.mturk import MTurkProvider, external_question, qualification_requirements

HTTPS = "https://captions.example.org"
HIT = {"HITId": "3HITAAAAAAAAAAAAAAAAAAAAAAAAA0", "HITTypeId": "3TYPE0000000000000000000000000",
       "HITGroupId": "3GROUP000000000000000000000000", "Title": "t", "Reward": "0.12", "MaxAssignments": 3,
       "CreationTime": datetime(2026, 5, 1, tzinfo=dt_timezone.utc),
       "Expiration": datetime(2026, 5, 4, tzinfo=dt_timezone.utc)}


@pytest.fixture
def client():
    c = boto3.client("mturk", region_name="us-east-1", endpoint_url="https://mturk-requester-sandbox.us-east-1.amazonaws.com",
                     aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
    with Stubber(c) as stubber:
        c.stubber = stubber
        yield c
        stubber.assert_no_pending_responses()


@pytest.fixture
def provider(client):
    sleeps = []
    p = MTurkProvider(client=client, backoff_base=0.01, max_attempts=4, sleep=sleeps.append)
    p.sleeps = sleeps
    return p


@pytest.fixture
def mturk_campaign(make_campaign, settings):
    settings.PUBLIC_BASE_URL = HTTPS

    def factory(n_items=12, reward=12, budget=100_000, **config):
        campaign = make_campaign("fluency", status="draft")
        keep = set(campaign.tasks.order_by("position").values_list("pk", flat=True)[:n_items])
        campaign.tasks.exclude(pk__in=keep).delete()
        config = {"tasks_per_assignment": 5, "max_assignments": 3, "title": "Rate image captions",
                  "description": "Say whether each caption reads fluently.", "keywords": "image, caption",
                  "assignment_duration_seconds": 1800, "lifetime_seconds": 86400,
                  "auto_approval_delay_seconds": 172800, "frame_height": 700, **config}
        Campaign.objects.filter(pk=campaign.pk).update(backend="mturk", reward_cents=reward, budget_cents=budget,
                                                       provider_config=config)
        campaign.refresh_from_db()
        return campaign

    return factory


def test_external_question_follows_the_schema_and_escapes_the_url():
    xml = external_question("https://x.org/mturk/3/?a=1&b=2", 650)
    assert xml.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert ('<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/'
            'ExternalQuestion.xsd">') in xml
    assert "<ExternalURL>https://x.org/mturk/3/?a=1&amp;b=2</ExternalURL>" in xml
    assert "<FrameHeight>650</FrameHeight>" in xml


def test_publish_creates_hits_with_external_question_qualifications_and_tokens(mturk_campaign, provider, client):
    campaign = mturk_campaign(qualifications={"approval_rate": 95, "approved_hits": 500, "locales": ["us", "GB"]})
    question = external_question(f"{HTTPS}/mturk/{campaign.pk}/", 700)
    requirements = [
        {"QualificationTypeId": "000000000000000000L0", "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [95],
         "ActionsGuarded": "Accept"},
        {"QualificationTypeId": "00000000000000000040", "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [500],
         "ActionsGuarded": "Accept"},
        {"QualificationTypeId": "00000000000000000071", "Comparator": "In",
         "LocaleValues": [{"Country": "US"}, {"Country": "GB"}], "ActionsGuarded": "Accept"},
    ]
    assert qualification_requirements(campaign) == requirements
    client.stubber.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    for batch in range(3):  # 12 items, 5 per assignment
        token = f"captionlab-c{campaign.pk}-r1-b{batch}"
        client.stubber.add_response("create_hit", {"HIT": {**HIT, "HITId": f"3HIT{batch:026d}"}}, {
            "MaxAssignments": 3, "AutoApprovalDelayInSeconds": 172800, "LifetimeInSeconds": 86400,
            "AssignmentDurationInSeconds": 1800, "Reward": "0.12", "Title": "Rate image captions",
            "Keywords": "image, caption", "Description": "Say whether each caption reads fluently.",
            "Question": question, "RequesterAnnotation": token, "UniqueRequestToken": token,
            "QualificationRequirements": requirements})
    seen = []
    jobs = provider.publish(campaign, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]
    jobs = list(ProviderJob.objects.filter(campaign=campaign).order_by("pk"))
    assert [j.status for j in jobs] == ["published"] * 3
    assert [j.external_id for j in jobs] == [f"3HIT{b:026d}" for b in range(3)]
    assert [len(j.task_ids) for j in jobs] == [5, 5, 2]
    # each HIT's rewards committed with MTurk's 20% fee: 3 x 12 = 36 cents + 7 cents
    assert money.summary(campaign)["committed"] == 3 * (36 + 7)
    campaign.refresh_from_db()
    assert campaign.status == "running"


def test_large_hits_pay_the_40_percent_fee(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=5, max_assignments=10)
    client.stubber.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    client.stubber.add_response("create_hit", {"HIT": HIT}, None)
    provider.publish(campaign)
    assert money.summary(campaign)["committed"] == 120 + 48


def test_publish_needs_an_https_public_url(mturk_campaign, provider, settings):
    campaign = mturk_campaign()
    settings.PUBLIC_BASE_URL = "http://captions.example.org"
    with pytest.raises(ProviderError, match="HTTPS") as info:
        provider.publish(campaign)
    assert info.value.code == "bad_config"
    assert not ProviderJob.objects.filter(campaign=campaign).exists()


def test_over_budget_is_refused_before_any_hit(mturk_campaign, provider, client):
    campaign = mturk_campaign(budget=100)  # 3 HITs need 129 cents
    client.stubber.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    with pytest.raises(ProviderError, match="Over budget") as info:
        provider.publish(campaign)
    assert info.value.code == "over_budget"
    assert not ProviderJob.objects.filter(campaign=campaign).exists()
    assert not LedgerEntry.objects.filter(campaign=campaign).exists()


@pytest.mark.parametrize("code", ["UnrecognizedClientException", "InvalidSignatureException"])
def test_wrong_credentials_are_a_clear_error_and_nothing_is_published(mturk_campaign, provider, client, code):
    campaign = mturk_campaign()
    client.stubber.add_client_error("get_account_balance", service_error_code=code, service_message="bad token",
                                    http_status_code=400)
    with pytest.raises(ProviderError, match="AWS_ACCESS_KEY_ID") as info:
        provider.publish(campaign)
    assert info.value.code == "credentials"
    assert not ProviderJob.objects.filter(campaign=campaign).exists()


def test_throttling_is_retried_with_exponential_backoff(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=5)
    client.stubber.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    client.stubber.add_client_error("create_hit", "ThrottlingException", "Rate exceeded", 400)
    client.stubber.add_client_error("create_hit", "ServiceUnavailable", "try later", 503)
    client.stubber.add_response("create_hit", {"HIT": HIT}, None)
    provider.publish(campaign)
    assert provider.sleeps == [0.01, 0.02]
    assert ProviderJob.objects.get(campaign=campaign).external_id == HIT["HITId"]


def test_throttling_past_the_attempts_leaves_the_batch_pending_for_a_retry(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=10)
    client.stubber.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    client.stubber.add_response("create_hit", {"HIT": HIT}, None)
    for _ in range(4):
        client.stubber.add_client_error("create_hit", "ThrottlingException", "Rate exceeded", 400)
    with pytest.raises(ProviderError) as info:
        provider.publish(campaign)
    assert info.value.retryable
    assert sorted(ProviderJob.objects.filter(campaign=campaign).values_list("status", flat=True)) == [
        "pending", "published"]
    # the retry (same token) finds that MTurk did create it after all
    token = ProviderJob.objects.get(campaign=campaign, status="pending").unique_token
    client.stubber.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    client.stubber.add_client_error("create_hit", "RequestError",
                                    f"The value for UniqueRequestToken {token} has already been used.", 400)
    client.stubber.add_response("list_hits", {"HITs": [{**HIT, "HITId": "3HITOTHER00000000000000000000",
                                                        "RequesterAnnotation": "someone else"},
                                                       {**HIT, "HITId": "3HITRETRIED0000000000000000000",
                                                        "RequesterAnnotation": token}]}, {"MaxResults": 100})
    provider.publish(campaign)
    statuses = dict(ProviderJob.objects.filter(campaign=campaign).values_list("unique_token", "status"))
    assert set(statuses.values()) == {"published"}
    assert ProviderJob.objects.get(unique_token=token).external_id == "3HITRETRIED0000000000000000000"


def test_campaign_qualification_type_is_created_once_and_granted(mturk_campaign, provider, client, make_campaign):
    campaign = mturk_campaign(n_items=5)
    task = campaign.tasks.first()
    Task.objects.create(campaign=campaign, role=Task.Role.QUALIFICATION, image=task.image, caption=task.caption)
    Campaign.objects.filter(pk=campaign.pk).update(qualification_pass_mark=0.5)
    campaign.refresh_from_db()
    client.stubber.add_response("create_qualification_type", {"QualificationType": {
        "QualificationTypeId": "3QUAL0000000000000000000000000", "Name": "x"}}, {
        "Name": f"CaptionLab qualification: {campaign.name}", "Keywords": "captionlab, qualification",
        "QualificationTypeStatus": "Active",
        "Description": f"Passed the qualification test of the CaptionLab campaign {campaign.name!r}."})
    assert provider.ensure_qualification_type(campaign) == "3QUAL0000000000000000000000000"
    assert provider.ensure_qualification_type(campaign) == "3QUAL0000000000000000000000000"  # no second call
    worker = Worker.objects.create(provider="mturk", external_id="A1WORKER")
    Membership.objects.create(campaign=campaign, worker=worker)
    client.stubber.add_response("associate_qualification_with_worker", {}, {
        "QualificationTypeId": "3QUAL0000000000000000000000000", "WorkerId": "A1WORKER", "IntegerValue": 1,
        "SendNotification": False})
    provider.qualify(campaign, worker, True)
    assert Membership.objects.get(worker=worker).qualified is True
    campaign.refresh_from_db()
    Campaign.objects.filter(pk=campaign.pk).update(provider_config={
        **campaign.provider_config, "qualifications": {"require_own": True}})
    campaign.refresh_from_db()
    assert qualification_requirements(campaign) == [{"QualificationTypeId": "3QUAL0000000000000000000000000",
                                                     "Comparator": "Exists", "ActionsGuarded": "Accept"}]


def _published(campaign, hit_id=HIT["HITId"]):
    job = ProviderJob.objects.create(campaign=campaign, provider="mturk", external_id=hit_id,
                                     unique_token=f"tok-{hit_id}", status="published", reward_cents=12,
                                     max_assignments=3)
    money.commit(campaign, "mturk", "reward", 36, f"{job.unique_token}:reward", job=job)
    return job


def _assignment(campaign, job, worker_id="A1WORKER", aid="3ASSIGN0000000000000000000001", **fields):
    worker, _ = Worker.objects.get_or_create(provider="mturk", external_id=worker_id)
    Membership.objects.get_or_create(campaign=campaign, worker=worker)
    return Assignment.objects.create(campaign=campaign, worker=worker, provider_assignment_id=aid,
                                     provider_job_id=job.external_id, job=job, **fields)


def test_list_assignments_pages_through_every_hit(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=5)
    _published(campaign)
    when = datetime(2026, 5, 2, tzinfo=dt_timezone.utc)
    statuses = ["Submitted", "Approved", "Rejected"]
    client.stubber.add_response("list_assignments_for_hit", {"NextToken": "p2", "Assignments": [
        {"AssignmentId": "3A1", "WorkerId": "W1", "HITId": HIT["HITId"], "AssignmentStatus": "Submitted",
         "SubmitTime": when, "Answer": "<x/>"}]},
        {"HITId": HIT["HITId"], "MaxResults": 100, "AssignmentStatuses": statuses})
    client.stubber.add_response("list_assignments_for_hit", {"Assignments": [
        {"AssignmentId": "3A2", "WorkerId": "W2", "HITId": HIT["HITId"], "AssignmentStatus": "Approved"}]},
        {"HITId": HIT["HITId"], "MaxResults": 100, "AssignmentStatuses": statuses, "NextToken": "p2"})
    subs = provider.pull_submissions(campaign)
    assert [(s.external_assignment_id, s.external_worker_id, s.status) for s in subs] == [
        ("3A1", "W1", "submitted"), ("3A2", "W2", "approved")]
    assert subs[0].submitted_at.startswith("2026-05-02")


def test_approve_reject_and_already_approved(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=5)
    job = _published(campaign)
    a = _assignment(campaign, job, state="submitted")
    client.stubber.add_response("approve_assignment", {}, {"AssignmentId": a.provider_assignment_id,
                                                           "RequesterFeedback": "Thanks"})
    provider.approve(a, "Thanks")
    # a resumed sync approves again: MTurk says RequestError, GetAssignment shows it approved
    client.stubber.add_client_error("approve_assignment", "RequestError",
                                    "This operation can be called with a status of: Submitted", 400)
    client.stubber.add_response("get_assignment", {"Assignment": {"AssignmentId": a.provider_assignment_id,
                                                                  "AssignmentStatus": "Approved"}},
                                {"AssignmentId": a.provider_assignment_id})
    provider.approve(a, "Thanks")
    b = _assignment(campaign, job, worker_id="A2WORKER", aid="3ASSIGN0000000000000000000002", state="submitted")
    client.stubber.add_response("reject_assignment", {}, {"AssignmentId": b.provider_assignment_id,
                                                          "RequesterFeedback": "Too fast"})
    provider.reject(b, "Too fast")
    # rejecting one that is approved is a real error
    client.stubber.add_client_error("reject_assignment", "RequestError",
                                    "This operation can be called with a status of: Submitted", 400)
    client.stubber.add_response("get_assignment", {"Assignment": {"AssignmentStatus": "Approved"}}, None)
    with pytest.raises(ProviderError, match="RequestError"):
        provider.reject(a, "no")


def test_bonus_is_sent_once_with_the_ledger_token(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=5)
    job = _published(campaign)
    a = _assignment(campaign, job, state="approved")
    client.stubber.add_response("send_bonus", {}, {"WorkerId": "A1WORKER", "BonusAmount": "0.25",
                                                   "AssignmentId": a.provider_assignment_id, "Reason": "Great work",
                                                   "UniqueRequestToken": "mturk:bonus:1"})
    provider.bonus(a, 25, "Great work", "mturk:bonus:1")
    entry = LedgerEntry.objects.get(token="mturk:bonus:1")
    assert entry.state == "paid" and entry.amount_cents == 25 and entry.assignment_id == a.pk
    assert LedgerEntry.objects.get(token="mturk:bonus:1:fee").amount_cents == 5
    provider.bonus(a, 25, "Great work", "mturk:bonus:1")  # paid: no second SendBonus (the stubber would fail)
    # an interrupted bonus (committed, not marked paid) is sent again with its token: MTurk's
    # duplicate-token answer counts as paid
    LedgerEntry.objects.filter(token__startswith="mturk:bonus:1").update(state="committed")
    client.stubber.add_client_error("send_bonus", "RequestError",
                                    "The value for UniqueRequestToken mturk:bonus:1 has already been used.", 400)
    provider.bonus(a, 25, "Great work", "mturk:bonus:1")
    assert LedgerEntry.objects.get(token="mturk:bonus:1").state == "paid"
    assert money.summary(campaign)["bonuses"] == 25


def test_block_notify_expire_and_delete(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=5)
    job = _published(campaign)
    a = _assignment(campaign, job, state="submitted")
    client.stubber.add_response("create_worker_block", {}, {"WorkerId": "A1WORKER", "Reason": "Spam answers"})
    sync.block(campaign, provider, a.worker, "Spam answers")
    assert Membership.objects.get(campaign=campaign, worker=a.worker).blocked
    client.stubber.add_response("notify_workers", {"NotifyWorkersFailureStatuses": []},
                                {"Subject": "New items", "MessageText": "More captions to rate.",
                                 "WorkerIds": ["A1WORKER", "A2WORKER"]})
    provider.notify(["A1WORKER", "A2WORKER"], "New items", "More captions to rate.")
    client.stubber.add_response("update_expiration_for_hit", {}, {
        "HITId": job.external_id, "ExpireAt": datetime(2015, 1, 1, tzinfo=dt_timezone.utc)})
    provider.expire_hit(job)
    job.refresh_from_db()
    assert job.sync_state["expired"]
    client.stubber.add_client_error("delete_hit", "RequestError", "This HIT is currently in the state 'Unassignable'",
                                    400)
    assert provider.delete_hit(job) is False
    client.stubber.add_response("delete_hit", {}, {"HITId": job.external_id})
    assert provider.delete_hit(job) is True
    job.refresh_from_db()
    assert job.status == "finished"
    assert LedgerEntry.objects.get(token=f"{job.unique_token}:reward").state == "cancelled"


def test_pause_and_extend(mturk_campaign, provider, client):
    campaign = mturk_campaign(n_items=5)
    Campaign.objects.filter(pk=campaign.pk).update(status="running")
    job = _published(campaign)
    client.stubber.add_response("update_expiration_for_hit", {}, {"HITId": job.external_id, "ExpireAt": ANY})
    provider.pause(campaign)
    job.refresh_from_db()
    assert job.status == "paused"
    client.stubber.add_response("create_additional_assignments_for_hit", {}, {
        "HITId": job.external_id, "NumberOfAdditionalAssignments": 2, "UniqueRequestToken": ANY})
    client.stubber.add_response("update_expiration_for_hit", {}, {"HITId": job.external_id, "ExpireAt": ANY})
    provider.extend(campaign, extra_assignments=2, extra_seconds=3600)
    job.refresh_from_db()
    assert job.status == "published" and job.max_assignments == 5
    campaign.refresh_from_db()
    assert campaign.status == "running"
