"""The link-out provider: any marketplace that sends its participants to a URL (Prolific,
CloudResearch Connect and similar).

A campaign gets a public start URL (``linkout-start`` with ``campaign.public_token``) that reads the
participant id (and study and session ids) from query parameters whose names are set in
``provider_config`` (Prolific's by default). The participant consents, does the normal work pages
and ends on a completion code and a redirect back to the marketplace.

Money: launching commits places x reward plus the marketplace's fee (``money``); an approval
draws the participant's reward out of that commitment and pays it; finishing releases the rest.
Without an API, approvals, rejections and bonuses go to the marketplace as the CSV files it takes
(``linkout_files.export_csv``) and the marketplace's status export comes back through
``linkout_files.import_statuses``; with ``provider_config["api"] == "prolific"`` the same calls go
through ``prolific.ProlificClient`` (``linkout_files.sync_api``).

provider_config keys: participant_param, study_param, session_param, consent (Markdown),
completion_code, completion_code_per_assignment, completion_url (https, "{code}" is replaced),
places, tasks_per_assignment, minutes, fee_rate, api, study_id.
"""
from __future__ import annotations

import re
import secrets
from urllib.parse import urlsplit

from django.db import transaction
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from .. import routing
from ..models import Assignment, Campaign, LedgerEntry, Membership, ProviderJob, Worker
from . import money
from .base import CrowdProvider, ProviderError, Submission, register

DEFAULTS = {"participant_param": "PROLIFIC_PID", "study_param": "STUDY_ID", "session_param": "SESSION_ID"}
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CODE_RE = re.compile(r"^[A-Za-z0-9_-]{4,40}$")
DEFAULT_CONSENT = ("You are invited to take part in a study that builds a dataset of image descriptions. "
                   "Your answers are stored with your participant id, never with your name. You may stop at "
                   "any time by returning the study.")


def config(campaign: Campaign) -> dict:
    return {**DEFAULTS, **(campaign.provider_config or {})}


def valid_id(value: str) -> bool:
    return bool(ID_RE.match(value or ""))


def check_completion_url(url: str) -> str:
    """An https URL with a host, or ProviderError."""
    url = (url or "").strip()
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or any(c.isspace() for c in url):
        raise ProviderError("The completion URL must be an https:// address, e.g. "
                            "https://app.prolific.com/submissions/complete?cc={code}", code="bad_config")
    return url


def completion_url(campaign: Campaign, code: str) -> str:
    url = check_completion_url(config(campaign).get("completion_url", ""))
    return url.replace("{code}", code)


def completion_code_for(campaign: Campaign, assignment: Assignment) -> str:
    if assignment.completion_code:
        return assignment.completion_code
    cfg = config(campaign)
    if cfg.get("completion_code_per_assignment"):
        return secrets.token_hex(4).upper()
    return str(cfg.get("completion_code") or "")


def _client(campaign: Campaign):
    if config(campaign).get("api") == "prolific":
        from .prolific import ProlificClient

        return ProlificClient()
    return None


def _study_job(campaign: Campaign) -> ProviderJob | None:
    return campaign.provider_jobs.filter(provider="linkout").order_by("pk").first()


def _pool(campaign: Campaign) -> LedgerEntry | None:
    return (LedgerEntry.objects.filter(campaign=campaign, kind=LedgerEntry.Kind.REWARD, assignment__isnull=True,
                                       token__startswith=f"linkout:{campaign.pk}:places:")
            .order_by("-state", "pk").first())


def _places(campaign: Campaign) -> int:
    try:
        places = int(config(campaign).get("places") or 0)
    except (TypeError, ValueError):
        places = 0
    if places <= 0:
        raise ProviderError("Set the number of places (participants) before launching.", code="bad_config")
    return places


def admitted(campaign: Campaign) -> int:
    """Participants holding a place: external workers with an assignment neither returned nor rejected."""
    return (Assignment.objects.filter(campaign=campaign, state__in=(Assignment.State.ACTIVE, Assignment.State.SUBMITTED,
                                                                     Assignment.State.APPROVED))
            .exclude(worker__provider=Campaign.Backend.INHOUSE).values("worker_id").distinct().count())


PLACES_LOCK_CLASS = 23_001  # first key of the PostgreSQL advisory lock that serialises admissions


def admit(campaign: Campaign, participant_id: str) -> None:
    """Check, inside the caller's transaction, that ``participant_id`` may take part: somebody
    already admitted always may (a reload, a second tab); a newcomer only while fewer than
    ``places`` participants hold an assignment (returned and rejected ones free their place).
    Raises ProviderError "full".

    Two newcomers arriving together must not both see the last free place, so admissions of a
    campaign are serialised by a transaction-scoped advisory lock, taken before any row lock
    (nothing else takes it, so it cannot join a deadlock); the caller creates the assignment in
    the same transaction. SQLite writes one transaction at a time anyway."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [PLACES_LOCK_CLASS, campaign.pk % 2**31])
    try:
        places = int(config(campaign).get("places") or 0)
    except (TypeError, ValueError):
        places = 0
    if places <= 0:
        return  # no limit set (a study is only launched with places; a campaign started by hand has none)
    holding = Assignment.objects.filter(campaign=campaign, worker__provider="linkout",
                                        worker__external_id=participant_id,
                                        state__in=(Assignment.State.ACTIVE, Assignment.State.SUBMITTED,
                                                   Assignment.State.APPROVED))
    if holding.exists():
        return
    if admitted(campaign) >= places:
        raise ProviderError(f"This study is full: all {places} places are taken. Please return it on the "
                            "marketplace; you will not be penalised.", code="full")


def validate(campaign: Campaign) -> None:
    cfg = config(campaign)
    for key in ("participant_param", "study_param", "session_param"):
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$", str(cfg.get(key) or "")):
            raise ProviderError(f"The query parameter name {key} is not a valid name.", code="bad_config")
    check_completion_url(cfg.get("completion_url", ""))
    code = str(cfg.get("completion_code") or "")
    if not cfg.get("completion_code_per_assignment") and not CODE_RE.match(code):
        raise ProviderError("The completion code must be 4 to 40 letters, digits, - or _.", code="bad_config")
    _places(campaign)
    if not campaign.tasks.filter(role="real").exists():
        raise ProviderError("This campaign has no items.", code="bad_config")


class LinkoutProvider(CrowdProvider):
    name = "linkout"
    label = "Link-out marketplace (Prolific, Connect...)"
    has_api = False  # a campaign with provider_config["api"] syncs through linkout_files.sync_api()

    def credentials_status(self, campaign):
        client = _client(campaign)
        if client is None:
            return True, "No API: approvals, rejections and bonuses go to the marketplace as CSV files."
        if not client.configured:
            return False, "The Prolific API token is not set (PROLIFIC_API_TOKEN in the server's environment)."
        return True, f"Prolific API at {client.base_url}."

    # -- publishing ----------------------------------------------------------------------------
    def publish(self, campaign, *, progress=None) -> list[ProviderJob]:
        """Launch (or resume) the study: commit places x reward + fee, give the campaign its
        public start URL, and with an API create and publish the study. All or nothing."""
        campaign.refresh_from_db()
        if campaign.status == Campaign.Status.RUNNING:
            return list(campaign.provider_jobs.filter(provider=self.name))
        validate(campaign)
        client = _client(campaign)
        if client is not None and not client.configured:
            raise ProviderError("The Prolific API token is not set (PROLIFIC_API_TOKEN in the server's "
                                "environment); nothing was launched.", code="credentials")
        with transaction.atomic():
            campaign = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
            job = _study_job(campaign)
            places = _places(campaign)
            if job is None:
                job = ProviderJob.objects.create(
                    campaign=campaign, provider=self.name, unique_token=f"linkout-{campaign.pk}-study",
                    max_assignments=places, reward_cents=campaign.reward_cents, task_ids=[])
                if campaign.reward_cents:
                    money.commit(campaign, self.name, LedgerEntry.Kind.REWARD, places * campaign.reward_cents,
                                 f"linkout:{campaign.pk}:places:0", job=job, max_assignments=places,
                                 note=f"{places} places x {campaign.reward_cents} cents")
            if not campaign.public_token:
                campaign.public_token = secrets.token_urlsafe(24)
            if client is not None:
                study_id = job.external_id
                if not study_id:
                    cfg = config(campaign)
                    start = reverse("linkout-start", args=[campaign.public_token])
                    base = (cfg.get("public_base_url") or _public_base()).rstrip("/")
                    study = client.create_study(
                        name=campaign.name, description=campaign.instructions[:2000] or campaign.name,
                        external_url=f"{base}{start}?{cfg['participant_param']}={{{{%PROLIFIC_PID%}}}}"
                                     f"&{cfg['study_param']}={{{{%STUDY_ID%}}}}&{cfg['session_param']}={{{{%SESSION_ID%}}}}",
                        places=places, reward_cents=campaign.reward_cents, minutes=int(cfg.get("minutes") or 10),
                        completion_code=str(cfg.get("completion_code") or ""))
                    study_id = str(study.get("id") or "")
                    if not study_id:
                        raise ProviderError("Prolific did not return a study id.", code="api_error")
                    job.external_id = study_id
                client.publish_study(study_id) if job.status == ProviderJob.Status.PENDING else client.start_study(study_id)
                campaign.provider_config = {**(campaign.provider_config or {}), "study_id": study_id}
            job.status, job.published_at = ProviderJob.Status.PUBLISHED, job.published_at or timezone.now()
            job.error = ""
            job.save()
            campaign.status = Campaign.Status.RUNNING
            campaign.save(update_fields=["status", "public_token", "provider_config", "updated_at"])
        return [job]

    def pause(self, campaign) -> None:
        job = _study_job(campaign)
        client = _client(campaign)
        with transaction.atomic():
            if client is not None and job is not None and job.external_id:
                client.pause_study(job.external_id)
            if job is not None:
                ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.PAUSED)
            Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.PAUSED)
        campaign.status = Campaign.Status.PAUSED

    def extend(self, campaign, *, extra_assignments: int = 0, extra_seconds: int = 0) -> None:
        """More places: commit their reward + fee first (refused past the budget)."""
        extra = int(extra_assignments or 0)
        if extra <= 0:
            raise ProviderError("Say how many places to add.", code="bad_request")
        job = _study_job(campaign)
        if job is None:
            raise ProviderError("Launch the study first.", code="not_launched")
        client = _client(campaign)
        with transaction.atomic():
            campaign = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
            n = LedgerEntry.objects.filter(campaign=campaign, token__startswith=f"linkout:{campaign.pk}:places:",
                                           kind=LedgerEntry.Kind.REWARD).count()
            places = job.max_assignments + extra
            if campaign.reward_cents:
                money.commit(campaign, self.name, LedgerEntry.Kind.REWARD, extra * campaign.reward_cents,
                             f"linkout:{campaign.pk}:places:{n}", job=job, max_assignments=places,
                             note=f"{extra} more places x {campaign.reward_cents} cents")
            if client is not None and job.external_id:
                client.set_places(job.external_id, places)
            ProviderJob.objects.filter(pk=job.pk).update(max_assignments=places)
            campaign.provider_config = {**(campaign.provider_config or {}), "places": places}
            campaign.save(update_fields=["provider_config", "updated_at"])

    def finish(self, campaign) -> None:
        """Close the study and release the reward money no approval drew."""
        job = _study_job(campaign)
        client = _client(campaign)
        with transaction.atomic():
            if client is not None and job is not None and job.external_id:
                client.stop_study(job.external_id)
            for entry in LedgerEntry.objects.filter(campaign=campaign, state=LedgerEntry.State.COMMITTED,
                                                    kind=LedgerEntry.Kind.REWARD, assignment__isnull=True,
                                                    token__startswith=f"linkout:{campaign.pk}:places:"):
                money.cancel(entry)
            if job is not None:
                ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.FINISHED)
            Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.FINISHED)
        campaign.status = Campaign.Status.FINISHED

    # -- submissions and reviews ---------------------------------------------------------------
    def pull_submissions(self, campaign) -> list[Submission]:
        client = _client(campaign)
        job = _study_job(campaign)
        if client is None or job is None or not job.external_id:
            return []
        out = []
        for row in client.list_submissions(job.external_id):
            out.append(Submission(external_assignment_id=str(row.get("id") or ""),
                                  external_worker_id=str(row.get("participant_id") or row.get("participant") or ""),
                                  job_external_id=job.external_id, status=submission_status(row.get("status")),
                                  answer={"study_code": row.get("study_code") or ""},
                                  submitted_at=row.get("completed_at")))
        return out

    def approve(self, assignment: Assignment, feedback: str = "", *, call_api: bool = True) -> None:
        with transaction.atomic():
            # Lock order (annotation.routing): the campaign row only, FOR NO KEY UPDATE (FOR UPDATE
            # would stop every vote). It serialises the approvals and rejections of the campaign, so
            # the assignment row is not locked: confirming below takes task rows, which must never
            # be waited for while holding an assignment row.
            Campaign.objects.select_for_update(no_key=True).only("pk").get(pk=assignment.campaign_id)
            a = Assignment.objects.select_related("campaign", "worker").get(pk=assignment.pk)
            if a.state == Assignment.State.APPROVED:
                return  # already approved: not an error
            if a.state == Assignment.State.REJECTED:
                raise ProviderError("This assignment was rejected; it cannot be approved now.", code="already_rejected")
            campaign = a.campaign
            reward = campaign.reward_cents
            entry = None
            if reward:
                pool = _pool(campaign)
                token = f"linkout:{a.pk}:reward"
                # call_api=False: the marketplace's own status says approved (it paid); only
                # an approval made here is held for a blocked participant
                if pool is not None:
                    entry = money.draw(pool, kind=LedgerEntry.Kind.REWARD, amount_cents=reward, token=token,
                                       assignment=a, worker=a.worker, note="reward on approval",
                                       upstream=not call_api)
                else:
                    entry = money.commit(campaign, self.name, LedgerEntry.Kind.REWARD, reward, token, assignment=a,
                                         worker=a.worker, note="reward on approval", upstream=not call_api)
            client = _client(campaign) if call_api else None
            if client is not None and a.provider_assignment_id:
                client.approve(a.provider_assignment_id)
            if not a.confirmed:
                routing.confirm_assignment(a)
            Assignment.objects.filter(pk=a.pk).update(state=Assignment.State.APPROVED, reviewed_at=timezone.now(),
                                                      feedback=feedback[:2000], confirmed=True,
                                                      submitted_at=a.submitted_at or timezone.now())
            if entry is not None:
                money.mark_paid(entry)
        assignment.refresh_from_db()

    def reject(self, assignment: Assignment, feedback: str, *, call_api: bool = True) -> None:
        with transaction.atomic():
            Campaign.objects.select_for_update(no_key=True).only("pk").get(pk=assignment.campaign_id)  # as approve
            a = Assignment.objects.select_related("campaign").get(pk=assignment.pk)
            if a.state == Assignment.State.REJECTED:
                return
            if a.state == Assignment.State.APPROVED:
                raise ProviderError("This assignment was approved and paid; it cannot be rejected now.",
                                    code="already_approved")
            client = _client(a.campaign) if call_api else None
            if client is not None and a.provider_assignment_id:
                client.reject(a.provider_assignment_id, feedback or "The answers did not meet the study's checks.")
            routing.discard_assignment(a)
            Assignment.objects.filter(pk=a.pk).update(state=Assignment.State.REJECTED, reviewed_at=timezone.now(),
                                                      feedback=feedback[:2000])
        assignment.refresh_from_db()

    def bonus(self, assignment: Assignment, amount_cents: int, reason: str, token: str) -> LedgerEntry:
        amount = int(amount_cents)
        if amount <= 0:
            raise ProviderError("A bonus must be more than 0.", code="bad_amount")
        a = Assignment.objects.select_related("campaign", "worker").get(pk=assignment.pk)
        if a.state == Assignment.State.REJECTED:
            raise ProviderError("A rejected assignment gets no bonus.", code="already_rejected")
        with transaction.atomic():
            entry = money.commit(a.campaign, self.name, LedgerEntry.Kind.BONUS, amount, token, assignment=a,
                                 worker=a.worker, note=reason[:300])
            if entry.state == LedgerEntry.State.PAID:
                return entry
            client = _client(a.campaign)
            job = _study_job(a.campaign)
            if client is not None and job is not None and job.external_id:
                bulk = client.create_bonuses(job.external_id, [(a.worker.external_id, amount)])
                client.pay_bonuses(str(bulk.get("id") or ""))
            return money.mark_paid(entry)

    # -- workers -----------------------------------------------------------------------------------
    def block(self, worker: Worker, reason: str) -> None:
        Worker.objects.filter(pk=worker.pk).update(blocked=True)
        for membership in Membership.objects.filter(worker=worker).select_related("campaign"):
            routing.block_worker(membership.campaign, worker, reason=reason)

    def qualify(self, campaign, worker, passed: bool) -> None:
        Membership.objects.update_or_create(campaign=campaign, worker=worker, defaults={"qualified": passed})

    # -- the worker's browser ----------------------------------------------------------------------
    def completion_code_for(self, campaign, assignment) -> str:
        return completion_code_for(campaign, assignment)

    def finish_assignment(self, request, campaign, assignment):
        code = assignment.completion_code or completion_code_for(campaign, assignment)
        try:
            url = completion_url(campaign, code)
        except ProviderError:
            url = ""
        return render(request, "annotation/linkout/complete.html",
                      {"campaign": campaign, "assignment": assignment, "code": code, "redirect_url": url})


def _public_base() -> str:
    from django.conf import settings

    return settings.PUBLIC_BASE_URL or "https://localhost"


# --- statuses as marketplaces write them ----------------------------------------------------------


def _norm_status(value) -> str:
    return re.sub(r"[\s_-]+", " ", str(value or "").strip().upper())


def submission_status(value) -> str:
    status = _norm_status(value)
    return {"APPROVED": "approved", "REJECTED": "rejected", "AWAITING REVIEW": "submitted",
            "RETURNED": "returned", "TIMED OUT": "expired", "ACTIVE": "active"}.get(status, status.lower())


LinkoutProvider.instance = register(LinkoutProvider())

__all__ = ["LinkoutProvider", "admit", "config", "valid_id", "check_completion_url", "completion_url", "completion_code_for",
           "admitted", "validate", "DEFAULTS", "DEFAULT_CONSENT"]
