"""The sync of providers with an API (Celery beat, ``annotation.provider_sync``).

For each running (or just finished) campaign whose provider ``has_api``:

1. pull what the provider says was submitted;
2. reconcile it with the stored assignments: one the provider lists under the same HIT and the
   same worker is confirmed (its quarantined votes count from now on); one it does not know
   (forged or mismatched worker / assignment / HIT ids) is discarded, its votes quarantined for
   good; work submitted on the marketplace without any answer here is rejected;
3. review each submitted assignment by the curator's rules (``review.decide``): approve or reject
   with feedback, bonus the good ones, block spammers (their votes leave the counts), then apply
   the campaign-wide gold rule of every provider (``annotation.quality.enforce_gold_rules``). A
   worker blocked here, in this sync or an earlier one, is never approved or paid: their other
   submitted assignments are held for the curator (or rejected when the rules reject them);
4. grant the campaign's qualification to workers who passed it here, notify workers;
5. expire the HITs of a campaign with nothing left to do, and delete them once reviewed.

Every step is a forward move of one assignment's state (active -> submitted -> approved or
rejected) and every payment has a unique ledger token, so a sync interrupted anywhere resumes
without double approvals or double bonuses: an approval the provider already has is success, and
a bonus whose entry is paid is not sent again.
"""
from __future__ import annotations

import logging
from collections import Counter

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import quality, routing
from ..models import Assignment, Campaign, LedgerEntry, Membership, ProviderJob, Task, Worker
from . import money, review
from .base import CrowdProvider, ProviderError, get_provider, providers

log = logging.getLogger(__name__)
State = Assignment.State


def _token(provider: CrowdProvider, assignment: Assignment, what: str) -> str:
    return f"{provider.name}:{assignment.provider_assignment_id or assignment.pk}:{what}"[:60]


def _rules(campaign: Campaign) -> dict:
    return dict((campaign.provider_config or {}).get("review") or {})


# --- reconcile --------------------------------------------------------------------------------------


def reconcile(campaign: Campaign, provider: CrowdProvider, submissions, report: Counter) -> None:
    now = timezone.now()
    grace = int(settings.PROVIDER_CONFIRM_GRACE_SECONDS)
    jobs = {j.external_id: j for j in ProviderJob.objects.filter(campaign=campaign, provider=provider.name)
            .exclude(external_id="")}
    listed = {s.external_assignment_id: s for s in submissions}
    ours = list(Assignment.objects.select_related("worker", "job")
                .filter(campaign=campaign, worker__provider=provider.name))
    matched = set()
    for a in ours:
        s = listed.get(a.provider_assignment_id) if a.provider_assignment_id else None
        if a.state == State.REJECTED and not a.confirmed:
            continue  # discarded before
        if s is None:
            if a.confirmed:
                continue
            unknown_job = a.provider_job_id not in jobs
            late = a.submitted_at is not None and (now - a.submitted_at).total_seconds() >= grace
            if a.state == State.ACTIVE and a.job is not None and a.job.duration_seconds:
                # MTurk takes an assignment back after its duration: abandoned (or never real)
                late = late or (now - a.started_at).total_seconds() >= a.job.duration_seconds + grace
            if not a.provider_assignment_id or unknown_job or late:
                routing.discard_assignment(a)
                report["discarded"] += 1
            continue
        if s.external_worker_id != a.worker.external_id or (a.provider_job_id and s.job_external_id != a.provider_job_id):
            routing.discard_assignment(a)  # ids that do not belong together: forged
            report["discarded"] += 1
            continue
        matched.add(a.provider_assignment_id)
        if not a.confirmed:
            report["confirmed_votes"] += routing.confirm_assignment(a)
            report["confirmed"] += 1
        if a.state == State.ACTIVE:
            submitted = parse_datetime(s.submitted_at) if isinstance(s.submitted_at, str) else None
            Assignment.objects.filter(pk=a.pk, state=State.ACTIVE).update(
                state=State.SUBMITTED, submitted_at=a.submitted_at or submitted or now)
            a.state = State.SUBMITTED
        if a.state == State.SUBMITTED and s.status == "approved":  # approved on the marketplace (auto-approval)
            _settle_approved(campaign, provider, a, a.feedback or "")
            report["approved_upstream"] += 1
        elif a.state == State.SUBMITTED and s.status == "rejected":
            Assignment.objects.filter(pk=a.pk, state=State.SUBMITTED).update(state=State.REJECTED, reviewed_at=now)
            report["rejected_upstream"] += 1
    for s in submissions:  # submitted there, nothing done here
        if s.external_assignment_id in matched or s.status != "submitted":
            continue
        if any(a.provider_assignment_id == s.external_assignment_id and a.worker.external_id == s.external_worker_id
               for a in ours):
            continue
        worker, _ = Worker.objects.get_or_create(provider=provider.name, external_id=s.external_worker_id)
        job = jobs.get(s.job_external_id)
        Assignment.objects.get_or_create(
            campaign=campaign, worker=worker, provider_assignment_id=s.external_assignment_id,
            defaults={"state": State.SUBMITTED, "confirmed": True, "provider_job_id": s.job_external_id, "job": job,
                      "submitted_at": now})
        report["foreign"] += 1


# --- review and pay ---------------------------------------------------------------------------------


def _reward_entry(campaign: Campaign, provider: CrowdProvider, a: Assignment, *,
                  upstream: bool = False) -> LedgerEntry | None:
    job = a.job
    if job is None or not job.reward_cents:
        return None
    pool = LedgerEntry.objects.filter(token=f"{job.unique_token}:reward").first()
    token = _token(provider, a, "reward")
    if pool is not None:
        return money.draw(pool, kind=LedgerEntry.Kind.REWARD, amount_cents=job.reward_cents, token=token,
                          assignment=a, worker=a.worker, note="approved assignment", upstream=upstream)
    return money.commit(campaign, provider.name, LedgerEntry.Kind.REWARD, job.reward_cents, token, job=job,
                        assignment=a, worker=a.worker, note="approved assignment", upstream=upstream)


def _record_approved(a: Assignment, feedback: str, entry) -> None:
    Assignment.objects.filter(pk=a.pk, state=State.SUBMITTED).update(
        state=State.APPROVED, reviewed_at=timezone.now(), feedback=feedback)
    a.state = State.APPROVED
    if entry is not None:
        money.mark_paid(entry)


def _settle_approved(campaign, provider, a: Assignment, feedback: str) -> None:
    """The marketplace approved (and paid) on its own, e.g. its auto-approval: record it."""
    _record_approved(a, feedback, _reward_entry(campaign, provider, a, upstream=True))


def approve(campaign: Campaign, provider: CrowdProvider, a: Assignment, feedback: str) -> None:
    """Draw the reward (idempotent), approve at the provider ("already approved" is success),
    then record the state and mark the reward paid."""
    entry = _reward_entry(campaign, provider, a)
    provider.approve(a, feedback)
    _record_approved(a, feedback, entry)


def reject(campaign: Campaign, provider: CrowdProvider, a: Assignment, feedback: str) -> None:
    provider.reject(a, feedback)
    Assignment.objects.filter(pk=a.pk, state=State.SUBMITTED).update(
        state=State.REJECTED, reviewed_at=timezone.now(), feedback=feedback)
    a.state = State.REJECTED
    routing.withdraw_votes(a)  # rejected work is not evidence: its items collect new votes


def pay_bonus(provider: CrowdProvider, a: Assignment, cents: int, reason: str) -> bool:
    """The rules' bonus of an approved assignment, once (ledger token per assignment)."""
    token = _token(provider, a, "bonus")
    if LedgerEntry.objects.filter(token=token, state=LedgerEntry.State.PAID).exists():
        return False
    provider.bonus(a, cents, reason, token)
    return True


def review_submitted(campaign: Campaign, provider: CrowdProvider, report: Counter) -> list[str]:
    rules = _rules(campaign)
    approved_workers = []
    pending = (Assignment.objects.select_related("worker", "job", "campaign")
               .filter(campaign=campaign, worker__provider=provider.name, state=State.SUBMITTED, confirmed=True)
               .order_by("pk"))
    pending = list(pending)
    # Who this sync is going to block, known before anybody is approved: a spammer's good-looking
    # assignment must not be approved and paid just because it comes before the one that blocks him.
    to_block = {w.pk for w in (m.worker for m in quality.failing_members(campaign))}
    for a in pending:
        decision, _ = review.decide(a, rules)
        if decision == "reject" and review.should_block(a, rules):
            to_block.add(a.worker_id)
    for a in pending:
        decision, feedback = review.decide(a, rules)
        if decision == "approve" and (a.worker_id in to_block or quality.worker_blocked(campaign.pk, a.worker_id)):
            decision = "hold"  # blocked now or before: held for the curator, never paid
            report["held_blocked"] += 1
        if decision == "approve":
            approve(campaign, provider, a, feedback)
            report["approved"] += 1
            approved_workers.append(a.worker.external_id)
        elif decision == "reject":
            reject(campaign, provider, a, feedback)
            report["rejected"] += 1
            if review.should_block(a, rules):
                block(campaign, provider, a.worker, "Too many check items answered wrongly.")
                report["blocked"] += 1
        else:
            report["held"] += 1
    def block_here_and_there(worker: Worker, why: str) -> None:
        if worker.provider == provider.name and worker.external_id:
            block(campaign, provider, worker, why)
        else:  # an in-house member of an external campaign: nothing to tell the marketplace
            routing.block_worker(campaign, worker, reason=why)

    for worker in quality.enforce_gold_rules(campaign, block=block_here_and_there):
        report["blocked_gold"] += 1
        log.info("sync of campaign %s blocked worker %s on gold accuracy", campaign.pk, worker.pk)
    if rules.get("bonus_cents"):
        reason = str(rules.get("bonus_reason") or "A bonus for careful work. Thank you!")
        blocked = quality.blocked_worker_ids(campaign)
        for a in (Assignment.objects.select_related("worker", "job", "campaign")
                  .filter(campaign=campaign, worker__provider=provider.name, state=State.APPROVED)
                  .exclude(worker_id__in=blocked).order_by("pk")):
            cents = review.bonus_for(a, rules)
            if cents and pay_bonus(provider, a, cents, reason):
                report["bonuses"] += 1
    return approved_workers


def block(campaign: Campaign, provider: CrowdProvider, worker: Worker, reason: str) -> None:
    """Block at the provider and here: the worker's votes leave the counts and aggregation."""
    provider.block(worker, reason)
    routing.block_worker(campaign, worker, reason=reason)


def grant_qualifications(campaign: Campaign, provider: CrowdProvider, report: Counter) -> None:
    config = campaign.provider_config or {}
    if not config.get("qualification_type_id"):
        return
    granted = set(config.get("qualification_granted") or [])
    fresh = list(Membership.objects.filter(campaign=campaign, qualified=True, worker__provider=provider.name)
                 .exclude(worker_id__in=granted).select_related("worker"))
    for membership in fresh:
        provider.qualify(campaign, membership.worker, True)
        granted.add(membership.worker_id)
        _update_config(campaign, qualification_granted=sorted(granted))
        report["qualified"] += 1


def _update_config(campaign: Campaign, **values) -> None:
    with transaction.atomic():
        locked = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
        config = dict(locked.provider_config or {})
        config.update(values)
        Campaign.objects.filter(pk=campaign.pk).update(provider_config=config)
    campaign.provider_config = config


def close_finished_jobs(campaign: Campaign, provider: CrowdProvider, submissions, report: Counter) -> None:
    """Expire the HITs when no item is left (or the campaign finished); delete each once it is
    expired and no assignment of it is pending or unreviewed."""
    if not hasattr(provider, "expire_hit"):
        return
    campaign.refresh_from_db(fields=["status"])
    nothing_left = not Task.objects.filter(campaign=campaign, role=Task.Role.REAL, status=Task.Status.OPEN).exists()
    unreviewed = {s.job_external_id for s in submissions if s.status == "submitted"}
    unreviewed |= set(Assignment.objects.filter(campaign=campaign, state=State.SUBMITTED, confirmed=True)
                      .values_list("provider_job_id", flat=True))
    for job in ProviderJob.objects.filter(campaign=campaign, provider=provider.name).exclude(external_id="").exclude(
            status__in=(ProviderJob.Status.FINISHED, ProviderJob.Status.FAILED)):
        state = job.sync_state or {}
        if not state.get("expired") and (nothing_left or campaign.status == Campaign.Status.FINISHED):
            provider.expire_hit(job)
            report["expired"] += 1
            state = job.sync_state
        if state.get("expired") and job.external_id not in unreviewed:
            hit = provider.get_hit(job)
            if int(hit.get("NumberOfAssignmentsPending") or 0) == 0 and provider.delete_hit(job):
                report["deleted"] += 1


def sync_campaign(campaign: Campaign, provider: CrowdProvider | None = None) -> dict:
    provider = provider or get_provider(campaign.backend)
    if not provider.has_api:
        return {}
    lock = f"provider-sync:{campaign.pk}"
    if not cache.add(lock, 1, timeout=int(settings.PROVIDER_SYNC_LOCK_SECONDS)):
        return {"skipped": "another sync of this campaign is running"}
    report = Counter()
    try:
        submissions = provider.pull_submissions(campaign)
        report["pulled"] = len(submissions)
        reconcile(campaign, provider, submissions, report)
        approved = review_submitted(campaign, provider, report)
        grant_qualifications(campaign, provider, report)
        rules = _rules(campaign)
        if approved and rules.get("notify_message") and hasattr(provider, "notify"):
            provider.notify(approved, str(rules.get("notify_subject") or campaign.name),
                            str(rules["notify_message"]))
            report["notified"] += len(approved)
        close_finished_jobs(campaign, provider, submissions, report)
    finally:
        cache.delete(lock)
    result = dict(report)
    _update_config(campaign, last_sync={"at": timezone.now().isoformat(), "report": result})
    return result


def sync_all() -> dict:
    """Every campaign of a provider with an API that still has unfinished jobs."""
    names = [name for name, p in providers().items() if p.has_api]
    out = {}
    campaigns = Campaign.objects.filter(backend__in=names, provider_jobs__isnull=False).exclude(
        provider_jobs__status=ProviderJob.Status.FINISHED, status=Campaign.Status.FINISHED).distinct()
    for campaign in campaigns:
        if not ProviderJob.objects.filter(campaign=campaign).exclude(status=ProviderJob.Status.FINISHED).exists():
            continue
        try:
            out[campaign.pk] = sync_campaign(campaign)
        except ProviderError as exc:
            log.warning("sync of campaign %s: %s", campaign.pk, exc.message)
            _update_config(campaign, last_sync={"at": timezone.now().isoformat(), "error": exc.message})
            out[campaign.pk] = {"error": exc.message}
    # Link-out campaigns whose marketplace has an API (Prolific) are pulled the same way.
    from .linkout_files import sync_api

    for campaign in Campaign.objects.filter(backend=Campaign.Backend.LINKOUT, status=Campaign.Status.RUNNING,
                                            provider_config__api="prolific"):
        try:
            out[campaign.pk] = sync_api(campaign)
        except ProviderError as exc:
            log.warning("sync of link-out campaign %s: %s", campaign.pk, exc.message)
            out[campaign.pk] = {"error": exc.message}
    return out
