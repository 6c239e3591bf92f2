"""Submitting: a vote on a task, stored with its counters under the task's row lock.

On PostgreSQL a plain vote (a real task, fixed overlap, not a written caption) is two statements:
the campaign's key share and the task row's lock taken together with the worker's reservation,
then the reservation's delete, the vote insert and the counter updates in one CTE. Everything else
takes the ORM path, which keeps the same invariants.

Duplicates: two submits of one vote queue on the task's row lock; the second finds the reservation
gone when it deletes it (the locking statement's snapshot can still show it) and returns the vote
the first stored, so a double click, a retry or two tabs get the same vote and never an
IntegrityError. Late votes: an expired reservation that is still there keeps its slot, so the vote
counts while the item is open; after the sweep took it, a free slot is taken under the row lock
(``_late_slot``); otherwise the answer is refused with 410 and nothing changes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from ..kinds import VoteInvalid
from ..models import Assignment, Campaign, Caption, GoldAnswer, Membership, Reservation, Task, Vote, Worker
from .counting import count_vote
from .errors import RoutingError
from .expiry import was_expired
from .hotsql import hot_cursor, prepared_sql, task_columns, task_from_row
from .members import stage_of


@dataclass
class Submitted:
    vote: Vote
    created: bool
    feedback: dict | None = None  # training: expected answer and explanation


def submit_vote(campaign: Campaign, worker: Worker, task_id: int, value, *, seconds: float = 0.0,
                membership: Membership | None = None) -> Submitted:
    """Record the worker's vote on a task they reserved. A replay, or a duplicate sent at the same
    time, returns the stored vote (``created`` False). A vote that comes after its reservation
    expired is taken while the task has room for it (see ``_late_slot``); otherwise 410."""
    kind = campaign.kind_spec
    try:
        seconds = min(max(float(seconds or 0.0), 0.0), 86400.0)
    except (TypeError, ValueError):
        seconds = 0.0
    if seconds != seconds:  # NaN
        seconds = 0.0
    now = timezone.now()
    refused = None
    with transaction.atomic():
        task, reservation = _lock_task(campaign, worker, task_id)
        if task is None:
            raise RoutingError("No such task in this campaign.", "no_task", 404)
        recorded = None
        if reservation is not None and reservation.expires_at <= now and not _has_room(task, held=True):
            # Its slot is no longer needed (dynamic overlap closed the item): give it back, commit
            # that below, then refuse.
            n, _ = Reservation.objects.filter(pk=reservation.pk).delete()
            if n and task.role == Task.Role.REAL:
                Task.objects.filter(pk=task.pk).update(reserved_count=max(task.reserved_count - n, 0))
            refused = _expired_full()
        elif reservation is not None:
            recorded = _record(campaign, kind, task, worker, reservation, value, seconds, now)
        if recorded is None and refused is None:
            # No reservation, or it went while this request waited for the row lock: a duplicate of
            # a vote just stored, a replay, or a vote after the sweep took the expired reservation.
            existing = Vote.objects.filter(task=task, worker=worker).first()
            if existing is not None:
                return Submitted(existing, False, _feedback(kind, task, existing))
            slot = _late_slot(campaign, task, worker, membership, now)
            recorded = _record(campaign, kind, task, worker, slot, value, seconds, now)
            if recorded is None:  # cannot happen under the row lock; say so rather than fail
                raise RoutingError("This task is not reserved to you; fetch the next task.", "not_reserved", 409)
    if refused is not None:
        raise refused
    vote, caption = recorded
    if caption is not None and campaign.rate_campaign_id and not vote.quarantined:
        feed_rating_campaign(campaign.rate_campaign, caption)
    return Submitted(vote, True, _feedback(kind, task, vote))


def _expired_full() -> RoutingError:
    return RoutingError("Your reservation of this item expired and it has all its votes now, so this answer was "
                        "not recorded.", "expired", 410)


def _has_room(task: Task, *, held: bool) -> bool:
    """Whether a vote on the task is still wanted: an item with a slot for it (``held``: the
    worker's expired reservation still holds one), or a gold item, which has no counters."""
    if task.role == Task.Role.GOLD:
        return True
    if task.role != Task.Role.REAL:
        return held  # training and qualification items are answered in the order served
    if task.status != Task.Status.OPEN:
        return False
    return held or task.votes_count + task.reserved_count < task.votes_required


def _late_slot(campaign, task, worker, membership, now) -> Reservation:
    """A vote on a task the worker holds no reservation of: taken when the worker held it until
    the sweep took the expired reservation (``expiry.was_expired``), is past training and
    qualification, works in an active assignment and the item still has a free slot. The slot
    is taken as a reservation under the task's row lock, so the vote is then recorded and counted
    like any other. Raises RoutingError otherwise."""
    if not was_expired(task.pk, worker.pk):
        raise RoutingError("This task is not reserved to you; fetch the next task.", "not_reserved", 409)
    if not _has_room(task, held=False):
        raise _expired_full()
    if membership is None:
        membership = Membership.objects.select_related("assignment").filter(campaign=campaign, worker=worker).first()
    assignment = membership.assignment if membership is not None else None
    if (membership is None or stage_of(campaign, membership) != "work" or assignment is None
            or assignment.state != Assignment.State.ACTIVE):
        raise RoutingError("Your reservation of this item expired and this answer cannot be recorded now; "
                           "fetch the next task.", "expired", 410)
    slot = Reservation.objects.create(task=task, worker=worker, campaign=campaign, assignment=assignment,
                                      expires_at=now + timedelta(seconds=campaign.reservation_seconds))
    if task.role == Task.Role.REAL:
        Task.objects.filter(pk=task.pk).update(reserved_count=F("reserved_count") + 1)
        task.reserved_count += 1
    slot.quarantine = assignment.confirmed is False
    return slot


def _lock_task(campaign, worker, task_id):
    """The task row, locked, and the worker's reservation of it, in one query. On PostgreSQL the
    same statement takes the campaign's key share first in the lock order (see the package's
    docstring). The reservation comes from the statement's snapshot: when this waited for the
    lock it may be gone already, which ``_record`` finds out when it deletes it."""
    if connection.vendor == "postgresql":
        return _lock_task_pg(campaign, worker, task_id)
    mine = Reservation.objects.filter(task=OuterRef("pk"), worker=worker)
    task = (Task.objects.select_for_update(no_key=True).filter(pk=task_id, campaign=campaign)
            .annotate(_res_id=Subquery(mine.values("pk")[:1]), _res_expires=Subquery(mine.values("expires_at")[:1]),
                      _res_assignment=Subquery(mine.values("assignment_id")[:1]),
                      _res_confirmed=Subquery(mine.values("assignment__confirmed")[:1]))
            .first())
    if task is None:
        return None, None
    task.campaign = campaign
    if task._res_id is None:
        return task, None
    reservation = Reservation(pk=task._res_id, task=task, worker=worker, campaign=campaign,
                              assignment_id=task._res_assignment, expires_at=task._res_expires)
    reservation._state.adding, reservation._state.db = False, task._state.db
    reservation.quarantine = task._res_confirmed is False
    return task, reservation


def _lock_task_pg(campaign, worker, task_id):
    sql = prepared_sql("lock", lambda: f"""
        SELECT r.id, r.assignment_id, r.created_at, r.expires_at, a.confirmed, {task_columns()}
        FROM {Campaign._meta.db_table} c
        JOIN {Task._meta.db_table} t ON t.campaign_id = c.id
        LEFT JOIN {Reservation._meta.db_table} r ON r.task_id = t.id AND r.worker_id = %s
        LEFT JOIN {Assignment._meta.db_table} a ON a.id = r.assignment_id
        WHERE t.id = %s AND c.id = %s
        FOR KEY SHARE OF c FOR NO KEY UPDATE OF t""")  # noqa: S608
    try:
        task_id = int(task_id)
    except (TypeError, ValueError):
        return None, None
    with hot_cursor() as cursor:
        cursor.execute(sql, [worker.pk, task_id, campaign.pk])
        row = cursor.fetchone()
    if row is None:
        return None, None
    task = task_from_row(row[5:], campaign)
    if row[0] is None:
        return task, None
    reservation = Reservation(pk=row[0], task=task, worker=worker, campaign=campaign, assignment_id=row[1],
                              created_at=row[2], expires_at=row[3])
    reservation._state.adding, reservation._state.db = False, connection.alias
    reservation.quarantine = row[4] is False
    return task, reservation


def _record(campaign, kind, task, worker, reservation, value, seconds, now=None):
    """Store a vote on a task whose row the caller has locked and that the worker reserved:
    (vote, written caption or None), or None when the reservation is gone (taken by a duplicate of
    this submit, or swept) and nothing was stored."""
    try:
        clean = kind.validate(value, task)
    except VoteInvalid as exc:
        raise RoutingError(str(exc), "invalid_value", 400) from None
    quarantine = getattr(reservation, "quarantine", False)
    if (connection.vendor == "postgresql" and task.role == Task.Role.REAL and kind.target != "image"
            and not quarantine and not campaign.dynamic_overlap and campaign.priority != Campaign.Priority.ENTROPY):
        vote = _record_plain_pg(campaign, task, worker, reservation, clean, seconds, now or timezone.now())
        return None if vote is None else (vote, None)
    # The reservation first: a fresh statement under the row lock, so its count says whether it is
    # still there (the locking statement's snapshot may predate a duplicate's commit).
    held, _ = Reservation.objects.filter(pk=reservation.pk).delete()
    if not held:
        return None
    correct = None
    if task.role != Task.Role.REAL:
        gold = GoldAnswer.objects.filter(task=task).first()
        if gold is not None:
            correct = kind.is_correct(clean, gold.value, gold.tolerance)
    try:
        with transaction.atomic():  # a savepoint: a vote of this worker that slipped in stays the one
            caption = None
            if kind.target == "image" and task.role == Task.Role.REAL:
                caption = _crowd_caption(campaign, task, worker, reservation, clean["text"])
            vote = Vote.objects.create(task=task, worker=worker, campaign=campaign,
                                       assignment_id=reservation.assignment_id, role=task.role, value=clean,
                                       correct=correct, seconds=seconds, caption=caption, quarantined=quarantine)
    except IntegrityError:
        if task.role == Task.Role.REAL:
            Task.objects.filter(pk=task.pk).update(reserved_count=max(task.reserved_count - 1, 0))
        return None
    if task.role == Task.Role.REAL:
        if not quarantine:
            count_vote(campaign, kind, task)
        # A quarantined vote is not counted until the provider confirms its assignment; it keeps
        # holding its slot (reserved_count) so that unconfirmed work does not send more workers to
        # the same item. confirm_assignment turns the slot into a vote, discard_assignment frees it.
    member_update = {"votes": F("votes") + 1, "seconds": F("seconds") + seconds}
    if task.role == Task.Role.GOLD:
        member_update["gold_seen"] = F("gold_seen") + 1
        if correct:
            member_update["gold_correct"] = F("gold_correct") + 1
    Membership.objects.filter(campaign=campaign, worker=worker).update(**member_update)
    if reservation.assignment_id:
        Assignment.objects.filter(pk=reservation.assignment_id).update(
            tasks_done=F("tasks_done") + 1, seconds=F("seconds") + seconds)
    return vote, caption


def _plain_vote_sql() -> str:
    """The reservation's delete drives the rest: no reservation (a duplicate took it a moment
    ago), no vote and no counter change. Counters are computed from the locked row itself."""
    task, vote, res, member, assignment = (m._meta.db_table for m in (Task, Vote, Reservation, Membership,
                                                                        Assignment))
    return f"""
        WITH r AS (
            DELETE FROM {res} WHERE id = %(reservation)s AND task_id = %(task)s AND worker_id = %(worker)s
            RETURNING id
        ), v AS (
            INSERT INTO {vote} (task_id, worker_id, campaign_id, assignment_id, role, value, correct, seconds,
                                caption_id, quarantined, created_at, updated_at)
            SELECT %(task)s::bigint, %(worker)s::bigint, %(campaign)s::bigint, %(assignment)s::bigint, 'real',
                   %(value)s::jsonb, NULL, %(seconds)s::double precision, NULL, FALSE, %(now)s::timestamptz,
                   %(now)s::timestamptz
            FROM r
            ON CONFLICT (task_id, worker_id) DO NOTHING
            RETURNING id
        ), n AS (
            SELECT (SELECT count(*) FROM v) AS voted, (SELECT count(*) FROM r) AS released
        ), t AS (
            UPDATE {task} SET votes_count = votes_count + n.voted,
                              reserved_count = GREATEST(reserved_count - n.released, 0),
                              status = CASE WHEN votes_count + n.voted >= votes_required THEN 'done'
                                            ELSE status END,
                              done_at = CASE WHEN n.voted > 0 AND votes_count + n.voted >= votes_required
                                             THEN %(now)s ELSE done_at END
            FROM n WHERE id = %(task)s AND n.released > 0
        ), m AS (
            UPDATE {member} SET votes = votes + 1, seconds = seconds + %(seconds)s
            WHERE campaign_id = %(campaign)s AND worker_id = %(worker)s AND EXISTS (SELECT 1 FROM v)
        ), a AS (
            UPDATE {assignment} SET tasks_done = tasks_done + 1, seconds = seconds + %(seconds)s
            WHERE id = %(assignment)s AND EXISTS (SELECT 1 FROM v)
        )
        SELECT (SELECT id FROM v)
    """  # noqa: S608


def _record_plain_pg(campaign, task, worker, reservation, clean, seconds, now) -> Vote | None:
    """The common vote (a real task, fixed overlap, not a written caption) in one statement: the
    vote, the reservation's delete and every counter, with the task row locked by the caller, so
    the same invariants hold as on the ORM path. None when the reservation was gone."""
    params = {"task": task.pk, "worker": worker.pk, "campaign": campaign.pk, "assignment": reservation.assignment_id,
              "value": json.dumps(clean), "seconds": seconds, "now": now, "reservation": reservation.pk}
    with hot_cursor() as cursor:
        cursor.execute(prepared_sql("vote", _plain_vote_sql), params)
        (vote_id,) = cursor.fetchone()
    if vote_id is None:
        return None
    vote = Vote(pk=vote_id, task=task, worker=worker, campaign=campaign, assignment_id=reservation.assignment_id,
                role=Task.Role.REAL, value=clean, correct=None, seconds=seconds, caption=None, created_at=now,
                updated_at=now)
    vote._state.adding, vote._state.db = False, connection.alias
    return vote


def _feedback(kind, task, vote) -> dict | None:
    if task.role != Task.Role.TRAINING:
        return None
    gold = GoldAnswer.objects.filter(task=task).first()
    if gold is None:
        return None
    return {"correct": vote.correct, "expected": gold.value, "feedback": gold.feedback}


def _crowd_caption(campaign, task, worker, reservation, text) -> Caption:
    caption = Caption(image_id=task.image_id, text=text, origin=Caption.Origin.CROWD, language=campaign.text_language,
                      source=f"campaign {campaign.pk} worker {worker.pk}",
                      metadata={"campaign": campaign.pk, "task": task.pk, "worker": worker.pk,
                                "assignment": reservation.assignment_id})
    caption.save()
    return caption


def feed_rating_campaign(rating: Campaign, caption: Caption) -> Task | None:
    """Write, then rate (seed 001's evaluate-filter-correct loop): a crowd caption becomes a task."""
    if rating.kind_spec.target != "caption":
        return None
    position = (rating.tasks.order_by("-position").values_list("position", flat=True).first() or 0) + 1
    task, _ = Task.objects.get_or_create(
        campaign=rating, role=Task.Role.REAL, caption=caption,
        defaults={"image_id": caption.image_id, "votes_required": rating.votes_per_item, "position": position,
                  "priority": float(position) if rating.priority == Campaign.Priority.ORDER else 0.0})
    return task
