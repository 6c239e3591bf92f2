"""Claiming: which task a worker gets next, reserved to them.

A worker's live reservation comes back first (a reload shows the same task), then training,
qualification, sometimes a gold item, then the best open real task. On PostgreSQL the real task is
claimed in one statement (``FOR NO KEY UPDATE SKIP LOCKED`` pick, counter bump and reservation
insert in a data-modifying CTE); elsewhere the ORM path keeps the same invariants.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from ..models import Assignment, Campaign, Caption, Membership, Reservation, Task, Vote, Worker
from .errors import RoutingError
from .expiry import sweep_expired
from .hotsql import hot_cursor, outermost, prepared_sql, task_columns, task_from_row
from .members import campaign_special_roles, ensure_assignment, membership_for, settle_stage, stage_for_role, stage_of


@dataclass
class Served:
    """What the annotator gets: a reserved task, or why there is none."""

    reservation: Reservation | None
    task: Task | None
    stage: str
    message: str = ""


def _reserve(task: Task, worker: Worker, campaign: Campaign, assignment: Assignment | None, now) -> Reservation:
    return Reservation.objects.create(task=task, worker=worker, campaign=campaign, assignment=assignment,
                                      expires_at=now + timedelta(seconds=campaign.reservation_seconds))


def _live_reservation(campaign: Campaign, worker: Worker, now) -> Reservation | None:
    if connection.vendor == "postgresql":
        return _live_reservation_pg(campaign, worker, now)
    return (Reservation.objects.select_related("task", "task__image", "task__caption")
            .filter(campaign=campaign, worker=worker, expires_at__gt=now).order_by("created_at").first())


def _live_reservation_pg(campaign, worker, now) -> Reservation | None:
    sql = prepared_sql("live", lambda: f"""
        SELECT r.id, r.assignment_id, r.created_at, r.expires_at, c.text, {task_columns()}
        FROM {Reservation._meta.db_table} r
        JOIN {Task._meta.db_table} t ON t.id = r.task_id
        LEFT JOIN {Caption._meta.db_table} c ON c.id = t.caption_id
        WHERE r.worker_id = %s AND r.campaign_id = %s AND r.expires_at > %s
        ORDER BY r.created_at LIMIT 1""")  # noqa: S608
    with hot_cursor() as cursor:
        cursor.execute(sql, [worker.pk, campaign.pk, now])
        row = cursor.fetchone()
    if row is None:
        return None
    task = task_from_row(row[5:], campaign, row[4])
    reservation = Reservation(pk=row[0], task=task, worker=worker, campaign=campaign, assignment_id=row[1],
                              created_at=row[2], expires_at=row[3])
    reservation._state.adding, reservation._state.db = False, connection.alias
    return reservation


def _next_special(campaign, worker, membership, role, now) -> Served:
    """The next training or qualification item (in their order), reserved without counters."""
    task = (campaign.tasks.filter(role=role).exclude(votes__worker=worker)
            .select_related("image", "caption").order_by("position", "pk").first())
    stage = "training" if role == Task.Role.TRAINING else "qualification"
    if task is None:  # all answered: settle the stage
        settle_stage(campaign, membership, role)
        return None
    try:
        with transaction.atomic():
            res = _reserve(task, worker, campaign, membership.assignment, now)
    except IntegrityError:
        res = Reservation.objects.get(task=task, worker=worker)
        Reservation.objects.filter(pk=res.pk).update(expires_at=now + timedelta(seconds=campaign.reservation_seconds))
    return Served(res, task, stage)


def next_task(campaign: Campaign, worker: Worker, membership: Membership | None = None) -> Served:
    """Reserve the worker's next task: their live reservation if they hold one (a reload shows the
    same task), else training, qualification, maybe a gold item, else the best open task."""
    if campaign.status != Campaign.Status.RUNNING:
        raise RoutingError(f"This campaign is {campaign.get_status_display().lower()}.", "not_running", 409)
    membership = membership or membership_for(campaign, worker)
    now = timezone.now()
    live = _live_reservation(campaign, worker, now)
    if live is not None:
        return Served(live, live.task, stage_for_role(live.task.role))
    ensure_assignment(membership)
    special = campaign_special_roles(campaign, membership)
    if membership.training_done_at is None and Task.Role.TRAINING not in special:
        # No training in this campaign when the worker starts: they are past it for good, so
        # later fetches skip the check (training comes before the first real task, not after).
        settle_stage(campaign, membership, Task.Role.TRAINING)
    for role in (Task.Role.TRAINING, Task.Role.QUALIFICATION):
        stage = stage_of(campaign, membership, special)
        if stage == "failed":
            return Served(None, None, "failed", "You did not reach the qualification test's pass mark.")
        if stage == stage_for_role(role):
            served = _next_special(campaign, worker, membership, role, now)
            if served is not None:
                return served
    if stage_of(campaign, membership, special) == "failed":
        return Served(None, None, "failed", "You did not reach the qualification test's pass mark.")
    if campaign.gold_rate > 0 and random.random() < campaign.gold_rate:
        gold = (campaign.tasks.filter(role=Task.Role.GOLD).exclude(votes__worker=worker)
                .exclude(reservations__worker=worker).select_related("image", "caption").order_by("?").first())
        if gold is not None:
            try:
                with transaction.atomic():
                    return Served(_reserve(gold, worker, campaign, membership.assignment, now), gold, "work")
            except IntegrityError:
                pass
    for attempt in range(2):
        served = claim_real(campaign, worker, membership, now)
        if served is not None:
            return served
        if attempt == 0 and not sweep_expired(campaign, now=now):
            break
    return Served(None, None, "done", "There are no more tasks for you in this campaign. Thank you!")


def claim_real(campaign, worker, membership, now) -> Served | None:
    if connection.vendor == "postgresql":
        return _claim_real_pg(campaign, worker, membership, now)
    with transaction.atomic():
        qs = (Task.objects.filter(campaign=campaign, role=Task.Role.REAL, status=Task.Status.OPEN,
                                  votes_required__gt=F("votes_count") + F("reserved_count"))
              .exclude(Exists(Vote.objects.filter(task=OuterRef("pk"), worker=worker)))
              .exclude(Exists(Reservation.objects.filter(task=OuterRef("pk"), worker=worker)))
              .order_by("priority", "pk"))
        if connection.features.has_select_for_update_skip_locked:
            qs = qs.select_for_update(skip_locked=True, no_key=True)
        task = qs.first()
        if task is None:
            return None
        reservation = _reserve(task, worker, campaign, membership.assignment, now)
        Task.objects.filter(pk=task.pk).update(reserved_count=F("reserved_count") + 1)
        task.reserved_count += 1
    task = Task.objects.select_related("image", "caption").get(pk=task.pk)
    return Served(reservation, task, "work")


def _claim_sql(after_last_vote: bool = False) -> str:
    """One statement: pick the best open task this worker has neither voted on nor reserved,
    skipping rows other workers are locking, bump its counter, insert the reservation, and return
    the task with its caption's text. The picked row stays locked until the statement commits, and
    PostgreSQL re-checks ``votes_required > votes_count + reserved_count`` on the newest row version
    when it locks it, so the counter invariant holds as on the ORM path."""
    task, vote, res, cap = (m._meta.db_table for m in (Task, Vote, Reservation, Caption))
    columns = task_columns()
    last, after = "", ""
    if after_last_vote:
        last = f"""last AS (
            SELECT lt.priority AS priority, lt.id AS id FROM {vote} lv JOIN {task} lt ON lt.id = lv.task_id
            WHERE lv.worker_id = %(worker)s AND lv.campaign_id = %(campaign)s AND lv.role = 'real'
            ORDER BY lv.created_at DESC, lv.id DESC LIMIT 1
        ), """  # noqa: S608
        after = "AND (t.priority, t.id) > (SELECT priority, id FROM last)"
    return f"""
        WITH {last}picked AS (
            SELECT t.id FROM {task} t
            WHERE t.campaign_id = %(campaign)s AND t.role = 'real' AND t.status = 'open'
              AND t.votes_required > t.votes_count + t.reserved_count {after}
              AND NOT EXISTS (SELECT 1 FROM {vote} v WHERE v.task_id = t.id AND v.worker_id = %(worker)s)
              AND NOT EXISTS (SELECT 1 FROM {res} r WHERE r.task_id = t.id AND r.worker_id = %(worker)s)
            ORDER BY t.priority, t.id
            LIMIT 1
            FOR NO KEY UPDATE SKIP LOCKED
        ), bumped AS (
            UPDATE {task} t SET reserved_count = t.reserved_count + 1
            FROM picked WHERE t.id = picked.id
            RETURNING {columns}
        ), reserved AS (
            INSERT INTO {res} (task_id, worker_id, campaign_id, assignment_id, created_at, expires_at)
            SELECT id, %(worker)s, %(campaign)s, %(assignment)s, %(now)s, %(expires)s FROM bumped
            RETURNING id
        )
        SELECT reserved.id, c.text, t.* FROM reserved, bumped t LEFT JOIN {cap} c ON c.id = t.caption_id
    """  # noqa: S608


def _claim_real_pg(campaign, worker, membership, now) -> Served | None:
    assignment_id = membership.assignment_id
    expires = now + timedelta(seconds=campaign.reservation_seconds)
    params = {"campaign": campaign.pk, "worker": worker.pk, "assignment": assignment_id, "now": now,
              "expires": expires}
    row = None
    for attempt in range(3):
        try:
            with transaction.atomic(), hot_cursor() as cursor:
                if outermost(connection):
                    # A reservation need not survive a crash (the worker fetches again), so its
                    # commit does not wait for the WAL flush: a vote's commit, which does,
                    # flushes every earlier commit with it, so no stored vote can depend on a
                    # lost reservation. This takes the disk's fsync off every fetch.
                    cursor.execute("SET LOCAL synchronous_commit TO OFF")
                row = None
                if campaign.priority != Campaign.Priority.ENTROPY:
                    # Priorities are fixed: start after the worker's last voted task, so a worker
                    # does not rescan the open tasks they voted on (all of them, for a lone
                    # worker); the full scan below still finds anything earlier that reopened.
                    cursor.execute(prepared_sql("claim_after", lambda: _claim_sql(after_last_vote=True)), params)
                    row = cursor.fetchone()
                if row is None:
                    cursor.execute(prepared_sql("claim", _claim_sql), params)
                    row = cursor.fetchone()
            break
        except IntegrityError:  # the same worker claimed meanwhile (two tabs): pick again
            row = None
    if row is None:
        return None
    reservation_id, caption_text, values = row[0], row[1], row[2:]
    task = task_from_row(values, campaign, caption_text)
    reservation = Reservation(pk=reservation_id, task=task, worker=worker, campaign=campaign,
                              assignment_id=assignment_id, created_at=now, expires_at=expires)
    reservation._state.adding, reservation._state.db = False, connection.alias
    return Served(reservation, task, "work")
