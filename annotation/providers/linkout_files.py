"""The link-out provider's files and sync: the CSVs a marketplace takes (approvals, rejections,
bonuses) written through the platform's one CSV writer, the marketplace's status export read back, and
the same statuses pulled through its API. Split out of ``linkout``, on top of it."""
from __future__ import annotations

import csv
import io
from decimal import Decimal

from django.utils import timezone

from captionlab import csv_safe

from .. import quality, routing
from ..models import Assignment, Campaign, LedgerEntry, ProviderJob
from .base import ProviderError
from .linkout import LinkoutProvider, submission_status, valid_id


def _amount(cents: int) -> str:
    return f"{Decimal(int(cents)) / 100:.2f}"


def export_csv(campaign: Campaign, kind: str) -> str:
    """The CSV the marketplace accepts.

    approvals: one participant id a line (Prolific's bulk approve); rejections:
    participant_id,reason; bonuses: participant_id,amount (2 decimals, Prolific's bulk bonus)."""
    out = io.StringIO()
    writer = csv_safe.writer(out, lineterminator="\n")
    assignments = (Assignment.objects.filter(campaign=campaign).select_related("worker").order_by("pk"))
    if kind == "approvals":
        for a in assignments.filter(state=Assignment.State.APPROVED):
            writer.writerow([a.worker.external_id])
    elif kind == "rejections":
        for a in assignments.filter(state=Assignment.State.REJECTED):
            writer.writerow([a.worker.external_id, a.feedback])
    elif kind == "bonuses":
        totals: dict[str, int] = {}
        for entry in (LedgerEntry.objects.filter(campaign=campaign, kind=LedgerEntry.Kind.BONUS,
                                                 state__in=(LedgerEntry.State.PAID, LedgerEntry.State.COMMITTED))
                      .select_related("worker").order_by("pk")):
            if entry.worker is not None:
                totals[entry.worker.external_id] = totals.get(entry.worker.external_id, 0) + entry.amount_cents
        for pid, cents in totals.items():
            writer.writerow([pid, _amount(cents)])
    else:
        raise ProviderError(f"Unknown export {kind!r}.", code="bad_request")
    return out.getvalue()


PID_COLUMNS = ("participant id", "participant_id", "participant", "prolific_pid", "participant id (prolific)",
               "worker id", "workerid", "worker_id")
STATUS_COLUMNS = ("status", "submission status")
CODE_COLUMNS = ("completion code", "completion_code", "entered code", "study_code", "code")
SUBMISSION_COLUMNS = ("submission id", "submission_id", "session id", "session_id")


def import_statuses(campaign: Campaign, text: str) -> dict:
    """Read the marketplace's status export (a header with a participant id column and a status
    column; or just participant ids, one a line, meaning approved) and apply it: APPROVED confirms
    and approves (pays the reward once), REJECTED rejects, AWAITING REVIEW with the right completion
    code confirms, RETURNED / TIMED-OUT expire. Idempotent: a second import changes nothing.
    Returns counts and a line-numbered list of problems."""
    report = {"approved": 0, "rejected": 0, "confirmed": 0, "expired": 0, "unchanged": 0, "problems": []}
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows:
        report["problems"].append((0, "The file is empty."))
        return report
    header = [c.strip().lower() for c in rows[0]]

    def col(names):
        return next((header.index(n) for n in names if n in header), None)

    pid_col, status_col, code_col, sub_col = col(PID_COLUMNS), col(STATUS_COLUMNS), col(CODE_COLUMNS), col(SUBMISSION_COLUMNS)
    if pid_col is None:
        if len(rows[0]) >= 1 and valid_id(rows[0][0].strip()):
            pid_col, start = 0, 0  # a bare list of ids: approvals
        else:
            report["problems"].append((1, "No participant id column (e.g. 'Participant id') in the header."))
            return report
    else:
        start = 1
    provider = LinkoutProvider.instance
    for lineno, row in enumerate(rows[start:], start=start + 1):
        if not any(c.strip() for c in row):
            continue
        pid = row[pid_col].strip() if pid_col < len(row) else ""
        if not valid_id(pid):
            report["problems"].append((lineno, f"'{pid[:40]}' is not a participant id."))
            continue
        status = submission_status(row[status_col]) if status_col is not None and status_col < len(row) else "approved"
        code = row[code_col].strip() if code_col is not None and code_col < len(row) else ""
        submission = row[sub_col].strip() if sub_col is not None and sub_col < len(row) else ""
        try:
            outcome = apply_status(campaign, pid, status, code=code, submission_id=submission, provider=provider)
        except ProviderError as exc:
            report["problems"].append((lineno, exc.message))
            continue
        if outcome == "unknown":
            report["problems"].append((lineno, f"No assignment of participant {pid} in this campaign."))
        else:
            report[outcome] = report.get(outcome, 0) + 1
    return report


def apply_status(campaign: Campaign, participant_id: str, status: str, *, code: str = "", submission_id: str = "",
                 provider=None, call_api: bool = False) -> str:
    """Bring one participant's assignment to the marketplace's status; the outcome's name."""
    provider = provider or LinkoutProvider.instance
    a = (Assignment.objects.filter(campaign=campaign, worker__provider="linkout", worker__external_id=participant_id)
         .order_by("-started_at").first())
    if a is None:
        return "unknown"
    if submission_id and valid_id(submission_id) and not a.provider_assignment_id:
        Assignment.objects.filter(pk=a.pk).update(provider_assignment_id=submission_id)
        a.provider_assignment_id = submission_id
    if status == "approved":
        if a.state == Assignment.State.APPROVED:
            return "unchanged"
        provider.approve(a, a.feedback, call_api=call_api)
        return "approved"
    if status == "rejected":
        if a.state == Assignment.State.REJECTED:
            return "unchanged"
        provider.reject(a, a.feedback or "Rejected on the marketplace.", call_api=call_api)
        return "rejected"
    if status == "submitted":
        if a.confirmed:
            return "unchanged"
        if a.completion_code and code and code.strip().upper() != a.completion_code.upper():
            raise ProviderError(f"Participant {participant_id} entered the code '{code[:40]}', not theirs.",
                                code="code_mismatch")
        if a.state != Assignment.State.SUBMITTED:
            return "unchanged"  # no completion code from us yet: nothing to confirm
        routing.confirm_assignment(a)
        return "confirmed"
    if status in ("returned", "expired"):
        if a.state in (Assignment.State.EXPIRED, Assignment.State.REJECTED, Assignment.State.APPROVED):
            return "unchanged"
        routing.discard_assignment(a)
        Assignment.objects.filter(pk=a.pk).update(state=Assignment.State.EXPIRED)
        return "expired"
    return "unchanged"


def sync_api(campaign: Campaign) -> dict:
    """Pull the study's submissions through the API and apply their statuses (idempotent)."""
    provider = LinkoutProvider.instance
    report = {"approved": 0, "rejected": 0, "confirmed": 0, "expired": 0, "unchanged": 0, "problems": []}
    for sub in provider.pull_submissions(campaign):
        try:
            outcome = apply_status(campaign, sub.external_worker_id, sub.status,
                                   code=sub.answer.get("study_code", ""), submission_id=sub.external_assignment_id,
                                   provider=provider, call_api=False)
        except ProviderError as exc:
            report["problems"].append((sub.external_worker_id, exc.message))
            continue
        if outcome == "unknown":
            report["problems"].append((sub.external_worker_id, "no assignment here"))
        else:
            report[outcome] = report.get(outcome, 0) + 1
    ProviderJob.objects.filter(campaign=campaign, provider="linkout").update(last_synced_at=timezone.now())
    report["blocked"] = len(quality.enforce_gold_rules(campaign))
    return report
