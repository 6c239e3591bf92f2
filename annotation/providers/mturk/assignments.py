"""Workers' assignments on MTurk: pulling, reviewing, paying and qualifying.

``AssignmentReviewMixin`` lists the submitted assignments of a campaign's HITs for the sync,
approves (never for a blocked worker; an assignment MTurk already approved counts as done) and
rejects them, sends bonuses through the money ledger (committed, sent with the same unique token,
then marked paid), notifies, blocks, and grants the campaign's qualification type to workers who
passed its test here.
"""
from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from ...models import Assignment, Campaign, LedgerEntry, Membership, ProviderJob, Worker
from .. import money
from ..base import ProviderError, Submission
from .layout import money_str


class AssignmentReviewMixin:
    """The review half of ``MTurkProvider``: assignments, bonuses and workers."""

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
            self.call("send_bonus", WorkerId=worker.external_id, BonusAmount=money_str(amount_cents),
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
