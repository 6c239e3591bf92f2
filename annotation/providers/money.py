"""Money: each provider's fee model, commitments against the campaign's budget, payments once.

Every amount is in cents and lives in ``LedgerEntry`` rows. A reward or bonus is first
*committed* (counted against the budget), then *paid* (spent) or *cancelled* (released). The
provider's fee on it is a separate FEE entry with the token ``<token>:fee`` that follows its
entry's state. Tokens are unique, so committing or paying twice with the same token is a no-op
that returns the entry already stored: a retried Celery task or a resumed sync cannot pay twice.

Locks: the campaign row ``FOR NO KEY UPDATE`` (never ``FOR UPDATE``, which would stop every vote;
see the lock order in ``annotation.routing``) serialises the commitments of one campaign.

Budget: the committed and paid amounts of a campaign, fees included, may never exceed
``campaign.budget_cents``; a commitment that would is refused with ``ProviderError`` code
``over_budget`` and nothing is written. The in-house provider is free: nothing is committed.
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from ..models import Assignment, Campaign, LedgerEntry, Task, Vote
from .errors import ProviderError

Kind, State = LedgerEntry.Kind, LedgerEntry.State

MTURK_RATE = Decimal("0.20")
MTURK_LARGE_HIT_RATE = Decimal("0.40")  # rewards of HITs with 10 or more assignments
MTURK_LARGE_HIT_ASSIGNMENTS = 10
LIVE_STATES = (State.COMMITTED, State.PAID)


def to_cents(value: Decimal) -> int:
    return int(value.quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def linkout_fee_rate(campaign: Campaign | None = None) -> Decimal:
    rate = settings.LINKOUT_FEE_RATE
    if campaign is not None and (campaign.provider_config or {}).get("fee_rate") not in (None, ""):
        rate = campaign.provider_config["fee_rate"]
    try:
        rate = Decimal(str(rate))
    except ArithmeticError:
        raise ProviderError(f"The fee rate {rate!r} is not a number.", code="bad_config") from None
    if not (Decimal(0) <= rate <= Decimal(5)):
        raise ProviderError(f"The fee rate {rate} is out of range (0 to 5).", code="bad_config")
    return rate


def fee_cents(provider_name: str, amount_cents: int, kind: str = Kind.REWARD, max_assignments: int = 1,
              campaign: Campaign | None = None) -> int:
    """The provider's fee on a reward or bonus of ``amount_cents``.

    MTurk: 20% of reward and bonus (at least one cent a payment), 40% of the reward when the HIT
    has 10 or more assignments (bonuses stay at 20%). Link-out: the campaign's
    ``provider_config["fee_rate"]`` or the LINKOUT_FEE_RATE setting. In-house: free."""
    amount = int(amount_cents or 0)
    if amount <= 0 or kind not in (Kind.REWARD, Kind.BONUS):
        return 0
    if provider_name == "mturk":
        rate = MTURK_RATE
        if kind == Kind.REWARD and int(max_assignments or 1) >= MTURK_LARGE_HIT_ASSIGNMENTS:
            rate = MTURK_LARGE_HIT_RATE
        return max(to_cents(amount * rate), 1)
    if provider_name == "linkout":
        return to_cents(amount * linkout_fee_rate(campaign))
    return 0


def ledger_totals(campaign_id: int) -> int:
    """Committed + paid, fees included, refunds subtracted."""
    live = LedgerEntry.objects.filter(campaign_id=campaign_id, state__in=LIVE_STATES)
    plus = live.exclude(kind=Kind.REFUND).aggregate(s=Sum("amount_cents"))["s"] or 0
    minus = live.filter(kind=Kind.REFUND).aggregate(s=Sum("amount_cents"))["s"] or 0
    return plus - minus


def _money(cents: int) -> str:
    return f"{cents / 100:.2f}"


def check_not_blocked(campaign: Campaign, worker, kind: str) -> None:
    """A blocked worker's rewards and bonuses are held: ProviderError "worker_blocked"."""
    from ..quality import worker_blocked

    if worker is not None and kind in (Kind.REWARD, Kind.BONUS) and worker_blocked(campaign.pk, worker.pk):
        raise ProviderError(f"{worker} is blocked in this campaign: their payment is held until a curator unblocks "
                            "them.", code="worker_blocked")


def commit(campaign: Campaign, provider: str, kind: str, amount_cents: int, token: str, job=None, assignment=None,
           worker=None, note: str = "", *, max_assignments: int | None = None, fee: int | None = None,
           upstream: bool = False) -> LedgerEntry:
    """Commit ``amount_cents`` (and the provider's fee on it) against the campaign's budget.

    The same token twice returns the stored entry. Refused (ProviderError "over_budget") when the
    campaign's committed and paid money plus this amount and fee would exceed its budget, and
    (ProviderError "worker_blocked") when it is a reward or bonus of a blocked worker, unless
    ``upstream``: the marketplace paid already (an auto-approval) and the ledger only records it."""
    token = str(token)[:60]
    if not token:
        raise ProviderError("A ledger entry needs a token.", code="bad_token")
    amount = int(amount_cents)
    if amount < 0:
        raise ProviderError("An amount cannot be negative.", code="bad_amount")
    existing = LedgerEntry.objects.filter(token=token).first()
    if existing is not None:
        return existing
    if not upstream:
        check_not_blocked(campaign, worker, kind)
    if max_assignments is None:
        max_assignments = job.max_assignments if job is not None else int(
            (campaign.provider_config or {}).get("max_assignments") or 1)
    if fee is None:
        fee = fee_cents(provider, amount, kind, max_assignments, campaign)
    with transaction.atomic():
        locked = Campaign.objects.select_for_update(no_key=True).only("pk", "budget_cents").get(pk=campaign.pk)
        existing = LedgerEntry.objects.filter(token=token).first()  # a concurrent retry won the lock first
        if existing is not None:
            return existing
        if provider != "inhouse":
            used = ledger_totals(locked.pk)
            if used + amount + fee > locked.budget_cents:
                left = max(locked.budget_cents - used, 0)
                raise ProviderError(
                    f"Over budget: this needs {_money(amount + fee)} ({_money(amount)} + {_money(fee)} fee) but "
                    f"only {_money(left)} of the campaign's {_money(locked.budget_cents)} budget is left. "
                    "Raise the budget or lower the reward.", code="over_budget")
        fields = dict(campaign=campaign, provider=provider, job=job, assignment=assignment, worker=worker)
        try:
            entry = LedgerEntry.objects.create(kind=kind, amount_cents=amount, token=token, note=note[:300], **fields)
            if fee:
                LedgerEntry.objects.create(kind=Kind.FEE, amount_cents=fee, token=fee_token(token),
                                           note=f"{provider} fee on {kind} {token}"[:300], **fields)
        except IntegrityError:  # only a concurrent insert of the same token can get here
            raise ProviderError("This payment is being recorded by another request.", code="busy",
                                retryable=True) from None
    return entry


def fee_token(token: str) -> str:
    return f"{token}:fee"


def fee_entry(entry: LedgerEntry) -> LedgerEntry | None:
    return LedgerEntry.objects.filter(token=fee_token(entry.token), kind=Kind.FEE).first()


def mark_paid(entry: LedgerEntry) -> LedgerEntry:
    """The entry (and its fee) were paid; paying a paid entry again changes nothing."""
    now = timezone.now()
    LedgerEntry.objects.filter(Q(pk=entry.pk) | Q(token=fee_token(entry.token)), state=State.COMMITTED).update(
        state=State.PAID, paid_at=now)
    entry.refresh_from_db()
    return entry


def mark_failed(entry: LedgerEntry, note: str = "") -> LedgerEntry:
    LedgerEntry.objects.filter(Q(pk=entry.pk) | Q(token=fee_token(entry.token)), state=State.COMMITTED).update(
        state=State.FAILED, note=note[:300] or entry.note)
    entry.refresh_from_db()
    return entry


def cancel(entry: LedgerEntry) -> LedgerEntry:
    """Release a commitment (and its fee); a paid entry stays paid."""
    LedgerEntry.objects.filter(Q(pk=entry.pk) | Q(token=fee_token(entry.token)), state=State.COMMITTED).update(
        state=State.CANCELLED)
    entry.refresh_from_db()
    return entry


def draw(pool: LedgerEntry, *, kind: str, amount_cents: int, token: str, assignment=None, worker=None,
         note: str = "", upstream: bool = False) -> LedgerEntry:
    """Move ``amount_cents`` out of a larger commitment (a link-out study's places x reward) into
    its own entry, e.g. one participant's reward on approval; what the pool does not cover is
    committed against the budget as usual. Idempotent on ``token``; a blocked worker's payment is
    refused as in ``commit``."""
    token = str(token)[:60]
    existing = LedgerEntry.objects.filter(token=token).first()
    if existing is not None:
        return existing
    campaign = pool.campaign
    if not upstream:
        check_not_blocked(campaign, worker, kind)
    with transaction.atomic():
        Campaign.objects.select_for_update(no_key=True).only("pk").get(pk=campaign.pk)
        existing = LedgerEntry.objects.filter(token=token).first()
        if existing is not None:
            return existing
        pool = LedgerEntry.objects.select_for_update().get(pk=pool.pk)
        covered = min(int(amount_cents), pool.amount_cents) if pool.state == State.COMMITTED else 0
        pool_fee = LedgerEntry.objects.filter(token=fee_token(pool.token), state=State.COMMITTED).first()
        max_assignments = pool.job.max_assignments if pool.job_id else 1
        fee = fee_cents(pool.provider, int(amount_cents), kind, max_assignments, campaign)
        fee_covered = min(fee, pool_fee.amount_cents) if (pool_fee is not None and covered) else 0
        if covered:
            LedgerEntry.objects.filter(pk=pool.pk).update(amount_cents=pool.amount_cents - covered)
            if fee_covered:
                LedgerEntry.objects.filter(pk=pool_fee.pk).update(amount_cents=pool_fee.amount_cents - fee_covered)
        # What the pool covered is already inside the budget check; commit() sees the pool reduced.
        entry = commit(campaign, pool.provider, kind, int(amount_cents), token, job=pool.job, assignment=assignment,
                       worker=worker, note=note, fee=fee, upstream=upstream)
    return entry


def _accepted_votes(campaign: Campaign):
    votes = Vote.objects.filter(campaign=campaign, role=Task.Role.REAL, quarantined=False)
    if campaign.backend == Campaign.Backend.INHOUSE:
        return votes
    return votes.filter(assignment__state=Assignment.State.APPROVED)


def summary(campaign: Campaign) -> dict:
    """Spent, committed and remaining money of a campaign (cents), and cost per accepted vote and
    per accepted caption (spent / accepted; None when nothing was accepted)."""
    rows = (LedgerEntry.objects.filter(campaign=campaign).values("kind", "state")
            .annotate(total=Sum("amount_cents")).order_by())
    paid = {k: 0 for k in Kind.values}
    committed = {k: 0 for k in Kind.values}
    for row in rows:
        if row["state"] == State.PAID:
            paid[row["kind"]] += row["total"] or 0
        elif row["state"] == State.COMMITTED:
            committed[row["kind"]] += row["total"] or 0
    spent = paid[Kind.REWARD] + paid[Kind.BONUS] + paid[Kind.FEE] - paid[Kind.REFUND]
    committed_total = committed[Kind.REWARD] + committed[Kind.BONUS] + committed[Kind.FEE] - committed[Kind.REFUND]
    accepted = _accepted_votes(campaign)
    accepted_votes = accepted.count()
    accepted_captions = accepted.filter(caption__isnull=False).count()
    return {
        "budget": campaign.budget_cents,
        "spent": spent,
        "committed": committed_total,
        "remaining": campaign.budget_cents - spent - committed_total,
        "fees": paid[Kind.FEE],
        "rewards": paid[Kind.REWARD],
        "bonuses": paid[Kind.BONUS],
        "accepted_votes": accepted_votes,
        "accepted_captions": accepted_captions,
        "cost_per_vote": round(spent / accepted_votes, 2) if accepted_votes else None,
        "cost_per_caption": round(spent / accepted_captions, 2) if accepted_captions else None,
    }


def format_cents(cents) -> str:
    if cents is None:
        return "—"
    return f"{cents / 100:,.2f}"


__all__ = ["fee_cents", "check_not_blocked", "commit", "mark_paid", "mark_failed", "cancel", "draw", "summary", "linkout_fee_rate",
           "fee_token", "fee_entry", "format_cents"]
