"""Amazon Mechanical Turk through boto3's ``mturk`` client.

AWS's MTurk API reference states that Mechanical Turk took no new requesters after 2026-07-30 and
closes permanently on 2026-09-30. The provider therefore talks to whatever endpoint
``settings.MTURK_ENDPOINT_URL`` names (the requester sandbox by default; tests point it at a local
server that answers the same JSON protocol).

A campaign becomes HITs whose ExternalQuestion frames the platform's own page (``mturk-task``):
one HIT per batch of ``tasks_per_assignment`` items, each with ``max_assignments`` assignments, so
every item can get its votes from distinct workers. Publishing is idempotent: each batch is a
``ProviderJob`` row whose deterministic ``unique_token`` is the HIT's ``UniqueRequestToken`` (and
``RequesterAnnotation``), so a retried batch never creates a second HIT. Money goes through
``annotation.providers.money``: a HIT's rewards (max assignments x reward, plus MTurk's fee) are
committed before it is created, an approved assignment draws its reward from that commitment and
is marked paid once MTurk accepted the approval.

Throttling and network errors are retried here with exponential backoff (botocore's own retries
are off, so this backoff is the one that runs; ``backoff_base`` is a parameter so tests do not
sleep). Credential problems become a ``ProviderError`` with code ``credentials`` and a message a
curator can act on.
"""
from __future__ import annotations

import logging
import math
import re
import time
from datetime import datetime, timedelta, timezone as dt_timezone
from xml.sax.saxutils import escape

from django.conf import settings
from django.db import transaction
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from ..models import Assignment, Campaign, LedgerEntry, Membership, ProviderJob, Task, Worker
from . import money
from .base import CrowdProvider, ProviderError, Submission, register

log = logging.getLogger(__name__)

EXTERNAL_QUESTION_XSD = ("http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
                         "ExternalQuestion.xsd")
PREVIEW_ASSIGNMENT_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"
QUAL_APPROVAL_RATE = "000000000000000000L0"  # PercentAssignmentsApproved
QUAL_APPROVED_HITS = "00000000000000000040"  # NumberHITsApproved
QUAL_LOCALE = "00000000000000000071"  # Worker_Locale
RETRYABLE_CODES = {"ThrottlingException", "Throttling", "ServiceUnavailable", "ServiceUnavailableException",
                   "RequestThrottled", "TooManyRequestsException", "InternalFailure", "ServiceFault"}
CREDENTIAL_CODES = {"UnrecognizedClientException", "InvalidSignatureException", "AccessDeniedException",
                    "InvalidClientTokenId", "SignatureDoesNotMatch", "MissingAuthenticationToken",
                    "ExpiredTokenException", "IncompleteSignature"}
SUBMIT_HOSTS = ("https://www.mturk.com", "https://workersandbox.mturk.com")
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

DEFAULTS = {
    "tasks_per_assignment": 10,
    "assignment_duration_seconds": 3600,
    "lifetime_seconds": 3 * 86400,
    "auto_approval_delay_seconds": 3 * 86400,
    "frame_height": 800,
    "keywords": "image, caption, rating, labeling",
}


def _money_str(cents: int) -> str:
    return f"{int(cents) // 100}.{int(cents) % 100:02d}"


def _int_config(config: dict, key: str, *, minimum: int, maximum: int) -> int:
    raw = config.get(key, DEFAULTS.get(key))
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ProviderError(f"MTurk setting {key!r} must be a whole number, not {raw!r}.", code="bad_config") from None
    if not minimum <= value <= maximum:
        raise ProviderError(f"MTurk setting {key!r} must be between {minimum} and {maximum} (it is {value}).",
                            code="bad_config")
    return value


def external_url(campaign: Campaign) -> str:
    base = (getattr(settings, "PUBLIC_BASE_URL", "") or "").rstrip("/")
    if not base.startswith("https://"):
        raise ProviderError(
            "MTurk only frames HTTPS pages: set PUBLIC_BASE_URL to the https:// address workers reach this "
            f"platform at (it is {base or 'not set'}).", code="bad_config")
    return base + reverse("mturk-task", args=[campaign.pk])


def external_question(url: str, frame_height: int) -> str:
    """The ExternalQuestion XML (MTurk's 2006-07-14 schema) that frames ``url``."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_XSD}">'
            f"<ExternalURL>{escape(url)}</ExternalURL>"
            f"<FrameHeight>{int(frame_height)}</FrameHeight>"
            "</ExternalQuestion>")


def qualification_requirements(campaign: Campaign) -> list[dict]:
    """MTurk QualificationRequirements from ``provider_config["qualifications"]``:
    ``approval_rate`` (percent), ``approved_hits`` (count), ``locales`` (country codes) and
    ``require_own`` (workers must already hold the campaign's own qualification type)."""
    quals = (campaign.provider_config or {}).get("qualifications") or {}
    reqs = []
    if quals.get("approval_rate") not in (None, ""):
        rate = int(quals["approval_rate"])
        if not 0 <= rate <= 100:
            raise ProviderError("The approval rate must be a percentage (0 to 100).", code="bad_config")
        reqs.append({"QualificationTypeId": QUAL_APPROVAL_RATE, "Comparator": "GreaterThanOrEqualTo",
                     "IntegerValues": [rate], "ActionsGuarded": "Accept"})
    if quals.get("approved_hits") not in (None, ""):
        reqs.append({"QualificationTypeId": QUAL_APPROVED_HITS, "Comparator": "GreaterThanOrEqualTo",
                     "IntegerValues": [int(quals["approved_hits"])], "ActionsGuarded": "Accept"})
    locales = quals.get("locales") or []
    if isinstance(locales, str):
        locales = [x for x in re.split(r"[\s,]+", locales) if x]
    if locales:
        bad = [x for x in locales if not re.fullmatch(r"[A-Za-z]{2}", str(x))]
        if bad:
            raise ProviderError(f"Locales are two-letter country codes (e.g. US, GB); not {', '.join(bad)}.",
                                code="bad_config")
        values = [{"Country": str(x).upper()} for x in locales]
        reqs.append({"QualificationTypeId": QUAL_LOCALE, "Comparator": "In" if len(values) > 1 else "EqualTo",
                     "LocaleValues": values, "ActionsGuarded": "Accept"})
    own = (campaign.provider_config or {}).get("qualification_type_id")
    if quals.get("require_own") and own:
        reqs.append({"QualificationTypeId": own, "Comparator": "Exists", "ActionsGuarded": "Accept"})
    return reqs


def make_client():
    import boto3
    from botocore.config import Config

    # A new session each time: the credentials are read from the environment as it is now
    # (boto3's default session would keep the first ones it found for the process's life).
    return boto3.session.Session().client(
        "mturk", endpoint_url=settings.MTURK_ENDPOINT_URL, region_name=settings.MTURK_REGION,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=30))


class MTurkProvider(CrowdProvider):
    name = "mturk"
    label = "Amazon Mechanical Turk"
    has_api = True

    def __init__(self, client=None, *, backoff_base: float | None = None, max_attempts: int | None = None,
                 sleep=time.sleep):
        self._client = client
        self._backoff_base = backoff_base
        self._max_attempts = max_attempts
        self.sleep = sleep

    def credentials_status(self, campaign) -> tuple[bool, str]:
        """Whether boto3 finds AWS credentials (environment, profile), without calling MTurk."""
        import boto3

        if boto3.session.Session().get_credentials() is None:
            return False, ("No AWS credentials for MTurk: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
                           "server's environment (or an AWS profile).")
        return True, f"AWS credentials found; MTurk endpoint {settings.MTURK_ENDPOINT_URL}."

    # -- the client and its calls --------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            return make_client()  # a fresh client follows the settings of the moment
        return self._client

    @property
    def backoff_base(self) -> float:
        if self._backoff_base is not None:
            return self._backoff_base
        return float(getattr(settings, "MTURK_BACKOFF_SECONDS", 1.0))

    @property
    def max_attempts(self) -> int:
        return self._max_attempts or int(getattr(settings, "MTURK_MAX_ATTEMPTS", 6))

    def call(self, operation: str, client=None, **params) -> dict:
        """One MTurk operation (boto3 method name), throttling and network errors retried with
        exponential backoff; every other failure becomes a ProviderError."""
        from botocore.exceptions import (BotoCoreError, ClientError, ConnectionError as BotoConnectionError,
                                         HTTPClientError, NoCredentialsError, PartialCredentialsError)

        client = client or self.client
        method = getattr(client, operation)
        attempt = 0
        while True:
            attempt += 1
            try:
                return method(**params)
            except (NoCredentialsError, PartialCredentialsError):
                raise ProviderError(
                    "No AWS credentials for MTurk: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the server's "
                    "environment (or an AWS profile) and try again. Nothing was published.",
                    code="credentials") from None
            except ClientError as exc:
                error = exc.response.get("Error", {})
                code, message = error.get("Code", ""), error.get("Message", "")
                if code in CREDENTIAL_CODES:
                    raise ProviderError(
                        f"MTurk refused the AWS credentials ({code}): check AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY, and that the account is a requester on "
                        f"{settings.MTURK_ENDPOINT_URL}. Nothing was published.", code="credentials") from None
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
                retryable = code in RETRYABLE_CODES or status >= 500 or status == 429
                if retryable and attempt < self.max_attempts:
                    self._pause(attempt, operation, code)
                    continue
                raise ProviderError(f"MTurk {operation} failed: {code}: {message}".strip(), code=code or "mturk_error",
                                    retryable=retryable) from exc
            except (BotoConnectionError, HTTPClientError) as exc:
                if attempt < self.max_attempts:
                    self._pause(attempt, operation, type(exc).__name__)
                    continue
                raise ProviderError(f"MTurk could not be reached at {settings.MTURK_ENDPOINT_URL}: {exc}",
                                    code="network", retryable=True) from exc
            except BotoCoreError as exc:
                raise ProviderError(f"MTurk {operation} failed: {exc}", code="mturk_error") from exc

    def _pause(self, attempt: int, operation: str, why: str) -> None:
        delay = self.backoff_base * (2 ** (attempt - 1))
        log.warning("MTurk %s: %s, retry %d in %.2fs", operation, why, attempt, delay)
        if delay > 0:
            self.sleep(delay)

    # -- configuration -------------------------------------------------------------------------
    def layout(self, campaign: Campaign) -> dict:
        """The HIT layout from provider_config, validated (ProviderError "bad_config")."""
        config = campaign.provider_config or {}
        reward = int(campaign.reward_cents or 0)
        if reward < 1:
            raise ProviderError("Set a reward per assignment (at least 1 cent) before publishing on MTurk.",
                                code="bad_config")
        title = str(config.get("title") or campaign.name)[:128]
        description = str(config.get("description") or f"{campaign.kind_spec.label}: {campaign.name}")[:2000]
        return {
            "tasks_per_assignment": _int_config(config, "tasks_per_assignment", minimum=1, maximum=1000),
            "max_assignments": _int_config({**config, "max_assignments": config.get(
                "max_assignments", campaign.votes_per_item)}, "max_assignments", minimum=1, maximum=1_000_000),
            "duration": _int_config(config, "assignment_duration_seconds", minimum=30, maximum=365 * 86400),
            "lifetime": _int_config(config, "lifetime_seconds", minimum=30, maximum=365 * 86400),
            "auto_approval": _int_config(config, "auto_approval_delay_seconds", minimum=0, maximum=30 * 86400),
            "frame_height": _int_config(config, "frame_height", minimum=0, maximum=10000),
            "keywords": str(config.get("keywords") or DEFAULTS["keywords"])[:1000],
            "title": title, "description": description, "reward": reward,
        }

    def batches(self, campaign: Campaign, tasks_per_assignment: int) -> list[list[int]]:
        ids = list(campaign.tasks.filter(role=Task.Role.REAL, status=Task.Status.OPEN)
                   .order_by("position", "pk").values_list("pk", flat=True))
        return [ids[i:i + tasks_per_assignment] for i in range(0, len(ids), tasks_per_assignment)]

    def unique_token(self, campaign: Campaign, round_: int, batch: int) -> str:
        return f"captionlab-c{campaign.pk}-r{round_}-b{batch}"

    # -- publishing ------------------------------------------------------------------------------
    def check_credentials(self, client=None) -> dict:
        """GetAccountBalance: the cheapest call that proves the credentials work."""
        return self.call("get_account_balance", client)

    def publish(self, campaign: Campaign, *, progress=None) -> list[ProviderJob]:
        """Create the campaign's HITs. Everything that can refuse (settings, HTTPS, credentials,
        the whole budget) is checked before the first HIT; a retry after an interruption
        creates only the HITs still missing."""
        client = self.client
        layout = self.layout(campaign)
        url = external_url(campaign)
        config = dict(campaign.provider_config or {})
        round_ = int(config.get("publish_round") or 1)
        existing = {j.unique_token: j for j in ProviderJob.objects.filter(campaign=campaign, provider=self.name)}
        pending_jobs = [j for j in existing.values() if j.status == ProviderJob.Status.PENDING]
        if pending_jobs:  # resume: the batches recorded before
            plan = [(j.unique_token, j.task_ids) for j in pending_jobs]
        else:
            if any(j.unique_token.startswith(f"captionlab-c{campaign.pk}-r{round_}-") for j in existing.values()):
                round_ += 1
            plan = [(self.unique_token(campaign, round_, i), ids)
                    for i, ids in enumerate(self.batches(campaign, layout["tasks_per_assignment"]))]
        if not plan:
            raise ProviderError("This campaign has no open items to publish.", code="nothing_to_publish")
        requirements = qualification_requirements(campaign)
        self.check_credentials(client)
        # The whole budget first: nothing is created unless every HIT of this round fits.
        per_hit = layout["reward"] * layout["max_assignments"]
        need = sum(per_hit + money.fee_cents(self.name, per_hit, "reward", layout["max_assignments"], campaign)
                   for token, _ in plan if not LedgerEntry.objects.filter(token=f"{token}:reward").exists())
        left = money.summary(campaign)["remaining"]
        if need > left:
            raise ProviderError(
                f"Over budget: {len(plan)} HITs of {layout['max_assignments']} assignments at "
                f"{_money_str(layout['reward'])} need {_money_str(need)} with MTurk's fee, but only "
                f"{_money_str(max(left, 0))} of the budget is left. Raise the budget or publish fewer items.",
                code="over_budget")
        self.ensure_qualification_type(campaign, client)
        config = dict(Campaign.objects.get(pk=campaign.pk).provider_config or {})
        config["publish_round"] = round_
        Campaign.objects.filter(pk=campaign.pk).update(provider_config=config)
        campaign.provider_config = config
        jobs = []
        for token, task_ids in plan:
            job, _ = ProviderJob.objects.get_or_create(
                unique_token=token, defaults={"campaign": campaign, "provider": self.name, "task_ids": task_ids,
                                              "reward_cents": layout["reward"],
                                              "max_assignments": layout["max_assignments"],
                                              "lifetime_seconds": layout["lifetime"],
                                              "duration_seconds": layout["duration"]})
            jobs.append(job)
        total, done = len(jobs), sum(1 for j in jobs if j.status != ProviderJob.Status.PENDING)
        if progress:
            progress(done, total)
        question = external_question(url, layout["frame_height"])
        for job in jobs:
            if job.status != ProviderJob.Status.PENDING:
                continue
            try:
                self._create_hit(campaign, job, layout, question, requirements, client)
            except ProviderError as exc:
                ProviderJob.objects.filter(pk=job.pk).update(error=exc.message[:2000])
                if not exc.retryable and done == 0:
                    self._abandon(campaign, jobs)  # nothing half-launched
                raise
            done += 1
            if progress:
                progress(done, total)
        if campaign.status in (Campaign.Status.DRAFT, Campaign.Status.PAUSED):
            Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
            campaign.status = Campaign.Status.RUNNING
        return jobs

    def _abandon(self, campaign: Campaign, jobs: list[ProviderJob]) -> None:
        """Forget jobs that never reached MTurk and release their money."""
        for job in jobs:
            if job.status == ProviderJob.Status.PENDING and not job.external_id:
                for entry in LedgerEntry.objects.filter(job=job, state=LedgerEntry.State.COMMITTED):
                    money.cancel(entry)
                job.delete()

    def _create_hit(self, campaign, job, layout, question, requirements, client) -> None:
        pool = money.commit(campaign, self.name, LedgerEntry.Kind.REWARD, layout["reward"] * layout["max_assignments"],
                            f"{job.unique_token}:reward", job=job, max_assignments=layout["max_assignments"],
                            note=f"HIT rewards: {layout['max_assignments']} x {_money_str(layout['reward'])}")
        params = {
            "MaxAssignments": layout["max_assignments"], "AutoApprovalDelayInSeconds": layout["auto_approval"],
            "LifetimeInSeconds": layout["lifetime"], "AssignmentDurationInSeconds": layout["duration"],
            "Reward": _money_str(layout["reward"]), "Title": layout["title"], "Keywords": layout["keywords"],
            "Description": layout["description"], "Question": question, "RequesterAnnotation": job.unique_token,
            "UniqueRequestToken": job.unique_token,
        }
        if requirements:
            params["QualificationRequirements"] = requirements
        try:
            hit = self.call("create_hit", client, **params)["HIT"]
        except ProviderError as exc:
            if "uniquerequesttoken" not in exc.message.lower() and "already" not in exc.message.lower():
                if not exc.retryable:
                    money.cancel(pool)
                raise
            hit = self.find_hit(job.unique_token, client)  # created by an earlier try: look it up
            if hit is None:
                raise
        expires = hit.get("Expiration")
        ProviderJob.objects.filter(pk=job.pk).update(
            external_id=hit["HITId"], group_id=hit.get("HITGroupId") or hit.get("HITTypeId", ""),
            status=ProviderJob.Status.PUBLISHED, published_at=timezone.now(), error="",
            expires_at=expires if isinstance(expires, datetime) else None)
        job.refresh_from_db()

    def find_hit(self, token: str, client=None) -> dict | None:
        """The HIT whose RequesterAnnotation is ``token`` (ListHITs, paged)."""
        params = {"MaxResults": 100}
        while True:
            page = self.call("list_hits", client, **params)
            for hit in page.get("HITs", []):
                if hit.get("RequesterAnnotation") == token:
                    return hit
            if not page.get("NextToken") or not page.get("HITs"):
                return None
            params["NextToken"] = page["NextToken"]

    def ensure_qualification_type(self, campaign: Campaign, client=None) -> str | None:
        """The campaign's own qualification type (created once, its id kept in provider_config),
        when the campaign has a qualification test."""
        config = campaign.provider_config or {}
        if config.get("qualification_type_id"):
            return config["qualification_type_id"]
        if campaign.qualification_pass_mark is None or not campaign.tasks.filter(role=Task.Role.QUALIFICATION).exists():
            return None
        try:
            qtype = self.call(
                "create_qualification_type", client, Name=f"CaptionLab qualification: {campaign.name}"[:128],
                Keywords="captionlab, qualification", QualificationTypeStatus="Active",
                Description=f"Passed the qualification test of the CaptionLab campaign {campaign.name!r}."[:2000],
            )["QualificationType"]
            qtype_id = qtype["QualificationTypeId"]
        except ProviderError as exc:
            if "already" not in exc.message.lower():
                raise
            found = self.call("list_qualification_types", client, Query=f"CaptionLab qualification: {campaign.name}"[:128],
                              MustBeRequestable=False, MustBeOwnedByCaller=True, MaxResults=10)
            types = found.get("QualificationTypes") or []
            if not types:
                raise
            qtype_id = types[0]["QualificationTypeId"]
        with transaction.atomic():
            locked = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
            config = dict(locked.provider_config or {})
            config["qualification_type_id"] = qtype_id
            Campaign.objects.filter(pk=campaign.pk).update(provider_config=config)
        campaign.provider_config = config
        return qtype_id

    def _jobs(self, campaign: Campaign, *statuses):
        qs = ProviderJob.objects.filter(campaign=campaign, provider=self.name).exclude(external_id="")
        return qs.filter(status__in=statuses) if statuses else qs

    def expire_hit(self, job: ProviderJob, client=None) -> None:
        """No new worker can accept the HIT (those working may finish)."""
        self.call("update_expiration_for_hit", client, HITId=job.external_id,
                  ExpireAt=datetime(2015, 1, 1, tzinfo=dt_timezone.utc))
        state = dict(job.sync_state or {}, expired=True)
        ProviderJob.objects.filter(pk=job.pk).update(sync_state=state, expires_at=timezone.now())
        job.sync_state = state

    def pause(self, campaign: Campaign) -> None:
        client = self.client
        for job in self._jobs(campaign, ProviderJob.Status.PUBLISHED):
            self.expire_hit(job, client)
            ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.PAUSED)
        Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.RUNNING).update(status=Campaign.Status.PAUSED)

    def extend(self, campaign: Campaign, *, extra_assignments: int = 0, extra_seconds: int = 0) -> None:
        client = self.client
        extra_seconds = int(extra_seconds or 0) or int((campaign.provider_config or {}).get(
            "lifetime_seconds") or DEFAULTS["lifetime_seconds"])
        for job in self._jobs(campaign, ProviderJob.Status.PUBLISHED, ProviderJob.Status.PAUSED):
            if extra_assignments:
                amount = job.reward_cents * int(extra_assignments)
                entry = money.commit(campaign, self.name, LedgerEntry.Kind.REWARD, amount,
                                     f"{job.unique_token}:more{job.max_assignments}+{extra_assignments}", job=job,
                                     max_assignments=job.max_assignments + int(extra_assignments))
                try:
                    self.call("create_additional_assignments_for_hit", client, HITId=job.external_id,
                              NumberOfAdditionalAssignments=int(extra_assignments),
                              UniqueRequestToken=entry.token[:64])
                except ProviderError:
                    money.cancel(entry)
                    raise
                ProviderJob.objects.filter(pk=job.pk).update(max_assignments=job.max_assignments + int(extra_assignments))
            expires = timezone.now() + timedelta(seconds=extra_seconds)
            self.call("update_expiration_for_hit", client, HITId=job.external_id, ExpireAt=expires)
            state = dict(job.sync_state or {}, expired=False)
            ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.PUBLISHED, expires_at=expires,
                                                         sync_state=state)
        Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.PAUSED).update(status=Campaign.Status.RUNNING)

    def finish(self, campaign: Campaign) -> None:
        """Expire every HIT; the sync reviews what is still submitted, then deletes them."""
        client = self.client
        for job in self._jobs(campaign, ProviderJob.Status.PUBLISHED, ProviderJob.Status.PAUSED):
            if not (job.sync_state or {}).get("expired"):
                self.expire_hit(job, client)
        Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.FINISHED)

    def delete_hit(self, job: ProviderJob, client=None) -> bool:
        """DeleteHIT once it is expired and every assignment is reviewed; the HIT's unused
        reward commitment is released. False when MTurk says it is not ready yet."""
        try:
            self.call("delete_hit", client, HITId=job.external_id)
        except ProviderError as exc:
            if exc.code != "RequestError" or "does not exist" not in exc.message.lower():
                if exc.code == "RequestError":
                    return False
                raise
        for entry in LedgerEntry.objects.filter(job=job, assignment__isnull=True, state=LedgerEntry.State.COMMITTED,
                                                kind=LedgerEntry.Kind.REWARD):
            money.cancel(entry)
        ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.FINISHED,
                                                     sync_state=dict(job.sync_state or {}, deleted=True))
        return True

    def get_hit(self, job: ProviderJob, client=None) -> dict:
        return self.call("get_hit", client, HITId=job.external_id)["HIT"]

    # -- submissions and reviews -------------------------------------------------------------------
    def pull_submissions(self, campaign: Campaign) -> list[Submission]:
        client = self.client
        out = []
        for job in self._jobs(campaign).exclude(status=ProviderJob.Status.FINISHED):
            params = {"HITId": job.external_id, "MaxResults": 100,
                      "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]}
            while True:
                page = self.call("list_assignments_for_hit", client, **params)
                for a in page.get("Assignments", []):
                    submit = a.get("SubmitTime")
                    out.append(Submission(
                        external_assignment_id=a["AssignmentId"], external_worker_id=a["WorkerId"],
                        job_external_id=a.get("HITId") or job.external_id,
                        status=str(a.get("AssignmentStatus", "Submitted")).lower(),
                        answer={"xml": a.get("Answer", "")},
                        submitted_at=submit.isoformat() if isinstance(submit, datetime) else submit))
                if not page.get("NextToken") or not page.get("Assignments"):
                    break
                params["NextToken"] = page["NextToken"]
            ProviderJob.objects.filter(pk=job.pk).update(last_synced_at=timezone.now())
        return out

    def _assignment_status(self, assignment: Assignment, client=None) -> str:
        try:
            got = self.call("get_assignment", client, AssignmentId=assignment.provider_assignment_id)
        except ProviderError:
            return ""
        return got.get("Assignment", {}).get("AssignmentStatus", "")

    def approve(self, assignment: Assignment, feedback: str = "") -> None:
        """ApproveAssignment; an assignment MTurk already approved counts as done. Never for a
        blocked worker (approving pays the reward): ProviderError "worker_blocked"."""
        money.check_not_blocked(assignment.campaign, assignment.worker, LedgerEntry.Kind.REWARD)
        client = self.client
        params = {"AssignmentId": assignment.provider_assignment_id}
        if feedback:
            params["RequesterFeedback"] = feedback[:1024]
        try:
            self.call("approve_assignment", client, **params)
        except ProviderError as exc:
            if exc.code == "RequestError" and self._assignment_status(assignment, client) == "Approved":
                return
            raise

    def reject(self, assignment: Assignment, feedback: str) -> None:
        client = self.client
        feedback = (feedback or "Your work did not meet the requirements in the instructions.")[:1024]
        try:
            self.call("reject_assignment", client, AssignmentId=assignment.provider_assignment_id,
                      RequesterFeedback=feedback)
        except ProviderError as exc:
            if exc.code == "RequestError" and self._assignment_status(assignment, client) == "Rejected":
                return
            raise

    def bonus(self, assignment: Assignment, amount_cents: int, reason: str, token: str) -> None:
        """Commit (idempotent on ``token``), SendBonus with the same token, mark paid."""
        amount_cents = int(amount_cents)
        if amount_cents < 1:
            raise ProviderError("A bonus must be at least 1 cent.", code="bad_amount")
        if not reason:
            raise ProviderError("MTurk needs a reason for a bonus (the worker sees it).", code="bad_reason")
        if assignment.state != Assignment.State.APPROVED:
            raise ProviderError("Only an approved assignment can get a bonus.", code="not_approved")
        campaign = assignment.campaign
        worker = assignment.worker
        entry = money.commit(campaign, self.name, LedgerEntry.Kind.BONUS, amount_cents, token, job=assignment.job,
                             assignment=assignment, worker=worker, note=reason[:300], max_assignments=1)
        if entry.state == LedgerEntry.State.PAID:
            return
        if entry.kind != LedgerEntry.Kind.BONUS or entry.amount_cents != amount_cents:
            raise ProviderError("This bonus token was already used for another payment.", code="bad_token")
        try:
            self.call("send_bonus", WorkerId=worker.external_id, BonusAmount=_money_str(amount_cents),
                      AssignmentId=assignment.provider_assignment_id, Reason=reason[:1024],
                      UniqueRequestToken=entry.token[:64])
        except ProviderError as exc:
            if not (exc.code == "RequestError" and "uniquerequesttoken" in exc.message.lower()):
                if not exc.retryable:
                    money.mark_failed(entry, exc.message)
                raise
        money.mark_paid(entry)

    def notify(self, worker_ids: list[str], subject: str, message: str) -> None:
        client = self.client
        ids = [w for w in worker_ids if w]
        for i in range(0, len(ids), 100):
            self.call("notify_workers", client, Subject=subject[:200], MessageText=message[:4096],
                      WorkerIds=ids[i:i + 100])

    # -- workers -----------------------------------------------------------------------------------
    def block(self, worker: Worker, reason: str) -> None:
        self.call("create_worker_block", WorkerId=worker.external_id,
                  Reason=(reason or "Work that did not follow the instructions.")[:1024])

    def qualify(self, campaign: Campaign, worker: Worker, passed: bool) -> None:
        """Grant the campaign's qualification type to a worker who passed its test here."""
        Membership.objects.filter(campaign=campaign, worker=worker).update(qualified=passed)
        if not passed or worker.provider != self.name or not worker.external_id:
            return
        qtype = (campaign.provider_config or {}).get("qualification_type_id")
        if not qtype:
            return
        self.call("associate_qualification_with_worker", QualificationTypeId=qtype, WorkerId=worker.external_id,
                  IntegerValue=1, SendNotification=False)

    # -- money -------------------------------------------------------------------------------------
    def fee_cents(self, amount_cents: int, *, kind: str, max_assignments: int = 1, campaign=None) -> int:
        return money.fee_cents(self.name, amount_cents, kind, max_assignments, campaign)

    def estimate(self, campaign: Campaign) -> dict:
        """What publishing would create and cost (for the provider page)."""
        layout = self.layout(campaign)
        hits = len(self.batches(campaign, layout["tasks_per_assignment"]))
        per_hit = layout["reward"] * layout["max_assignments"]
        fee = money.fee_cents(self.name, per_hit, "reward", layout["max_assignments"], campaign)
        return {"hits": hits, "assignments": hits * layout["max_assignments"], "cost_cents": hits * (per_hit + fee)}

    # -- the worker's last step ---------------------------------------------------------------------
    def finish_assignment(self, request, campaign: Campaign, assignment: Assignment) -> HttpResponse:
        """An auto-submitting form that posts the assignmentId to turkSubmitTo/mturk/externalSubmit
        (the votes are stored by then)."""
        from .. import views_mturk

        info = views_mturk.mturk_session(request, campaign)
        submit_to = views_mturk.valid_submit_to(info.get("turk_submit_to", "")) if info else None
        if not info or submit_to is None or info.get("assignment_id") != assignment.provider_assignment_id:
            html = render_to_string("annotation/mturk/message.html", {
                "campaign": campaign, "title": "Cannot submit to MTurk",
                "message": "This page does not know where to submit your HIT. Open the HIT again from MTurk."},
                request=request)
            return views_mturk.framable(HttpResponse(html, status=400))
        html = render_to_string("annotation/mturk/submit.html", {
            "campaign": campaign, "action": submit_to + "/mturk/externalSubmit",
            "assignment_id": assignment.provider_assignment_id, "tasks_done": assignment.tasks_done,
        }, request=request)
        return views_mturk.framable(HttpResponse(html))


def hits_needed(n_tasks: int, tasks_per_assignment: int) -> int:
    return math.ceil(n_tasks / max(tasks_per_assignment, 1))


register(MTurkProvider())
