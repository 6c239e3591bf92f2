"""Task routing and votes: the annotator's hot path.

Invariants, kept under concurrency:
- a task's ``votes_count`` and ``reserved_count`` change only while its row is locked
  (``SELECT ... FOR UPDATE``), so ``votes_count + reserved_count <= votes_required`` always holds
  for real tasks and every task ends with exactly its required votes;
- a worker holds at most one reservation per task (unique) and one vote per task (unique), so no
  worker votes twice on a task, and a replayed submit finds the vote and returns it;
- locks are always taken task row first, then its reservations, so routing, voting and the
  expiry sweep cannot deadlock.

On PostgreSQL the next task is chosen with ``FOR UPDATE SKIP LOCKED``: concurrent workers skip a
row another worker is reserving instead of queueing on it. SQLite has no row locks; there a write
transaction locks the database (``BEGIN IMMEDIATE`` semantics come from the first write), which is
correct, only slower.

Speed (the annotator's loop runs hundreds of times a second): on PostgreSQL a claim is one
statement (``SKIP LOCKED`` pick, counter bump and reservation insert in a data-modifying CTE) and
a plain vote is two (the task row locked together with the worker's reservation, then the vote
insert, reservation delete and counter updates in one CTE); everything else, and every other
database, takes the ORM path, which keeps the same invariants. The number of queries of a fetch
and of a submit does not depend on the campaign's size (tests/annotation/test_api_hot.py).
"""
from __future__ import annotations

import json
import math
import random
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef, Subquery
from django.utils import timezone

from .kinds import VoteInvalid
from .models import Assignment, Campaign, Caption, GoldAnswer, Membership, Reservation, Task, Vote, VoteEdit, Worker


@contextmanager
def hot_cursor():
    """The cursor of the annotator's hot path. On PostgreSQL it binds parameters on the server, so
    psycopg prepares each hot statement after a few runs and PostgreSQL plans it once per
    connection instead of once per request (planning the claim's anti-joins cost more CPU than
    running them). Django's default cursor binds on the client and never prepares. Queries run
    through Django's wrapper, so they are logged and counted like any other."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            yield cursor
        return
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:  # Django turns psycopg's automatic preparation off
        raw.prepare_threshold = 2  # only server-binding cursors (this one) ever prepare
    with connection._prepare_cursor(ServerBindingCursor(raw)) as cursor:
        yield _LoggedSQL(cursor)


class _LoggedSQL:
    """Django's query log cannot render a prepared statement's SQL (it records None); this puts
    the statement and its parameters there instead, for DEBUG pages and query-counting tests."""

    def __init__(self, cursor):
        self._cursor = cursor

    def execute(self, sql, params=None):
        result = self._cursor.execute(sql, params)
        log = connection.queries_log
        if connection.queries_logged and log and log[-1].get("sql") is None:
            log[-1]["sql"] = f"{' '.join(sql.split())} -- prepared; params {params!r}"
        return result

    def __getattr__(self, name):
        return getattr(self._cursor, name)


class RoutingError(Exception):
    """A refused request, with the HTTP status that says why."""

    def __init__(self, message: str, code: str, status: int = 400):
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


# --- workers and memberships ----------------------------------------------------------------


def worker_for_user(user) -> Worker:
    worker = getattr(user, "_captionlab_worker", None)
    if worker is None:
        worker, _ = Worker.objects.get_or_create(user=user, defaults={"provider": Worker.Provider.INHOUSE})
        user._captionlab_worker = worker
    return worker


def membership_for(campaign: Campaign, worker: Worker, *, join: bool = True) -> Membership:
    """The worker's membership of the campaign; joins an open campaign. Raises 403/404 otherwise."""
    membership = (Membership.objects.select_related("assignment")
                  .filter(campaign=campaign, worker=worker).first())
    if membership is None:
        if not (join and campaign.open_to_all):
            raise RoutingError("You are not a member of this campaign.", "not_member", 404)
        membership, _ = Membership.objects.get_or_create(campaign=campaign, worker=worker)
    if membership.blocked or worker.blocked:
        raise RoutingError("You have been blocked from this campaign.", "blocked", 403)
    return membership


def ensure_assignment(membership: Membership) -> Assignment:
    assignment = membership.assignment
    if assignment is None or assignment.state != Assignment.State.ACTIVE:
        assignment = Assignment.objects.create(campaign_id=membership.campaign_id, worker_id=membership.worker_id)
        Membership.objects.filter(pk=membership.pk).update(assignment=assignment)
        membership.assignment = assignment
    return assignment


# --- stages: training, qualification, work ----------------------------------------------------


def stage_of(campaign: Campaign, membership: Membership, special_roles: set | None = None) -> str:
    """"training", "qualification", "failed", or "work". ``special_roles`` (the roles among
    training and qualification the campaign has tasks of) saves the queries when known."""
    def has(role):
        if special_roles is not None:
            return role in special_roles
        return campaign.tasks.filter(role=role).exists()

    if membership.training_done_at is None and has(Task.Role.TRAINING):
        return "training"
    if campaign.qualification_pass_mark is not None and membership.qualified is not True:
        if membership.qualified is False:
            return "failed"
        if has(Task.Role.QUALIFICATION):
            return "qualification"
    return "work"


def _special_roles(campaign: Campaign, membership: Membership) -> set:
    """The special roles the campaign has tasks of, in one query, and none at all once the member
    is past both stages (the common case on the hot path)."""
    if membership.training_done_at is not None and (campaign.qualification_pass_mark is None
                                                    or membership.qualified is not None):
        return set()
    return set(Task.objects.filter(campaign=campaign, role__in=(Task.Role.TRAINING, Task.Role.QUALIFICATION))
               .order_by().values_list("role", flat=True).distinct())


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


# --- PostgreSQL: the hot statements as plain SQL ----------------------------------------------
# Building an ORM query costs far more CPU than PostgreSQL spends running these (measured with
# benchmarks/annotate_load.py), so the statements run on every fetch and vote are written once.

_TASK_FIELDS = list(Task._meta.concrete_fields)
_SQL: dict[str, str] = {}


def _sql(name: str, build) -> str:
    text = _SQL.get(name)
    if text is None:
        text = _SQL[name] = build()
    return text


def _task_columns(alias: str = "t") -> str:
    return ", ".join(f'{alias}."{f.column}"' for f in _TASK_FIELDS)


def _task_from_row(values, campaign: Campaign, caption_text=None) -> Task:
    """A Task from its columns in field order (JSON decoded as the ORM does), with its campaign
    and, when the row has one, a caption holding only id and text (the rest loads on access)."""
    values = [f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
              for f, v in zip(_TASK_FIELDS, values)]
    task = Task.from_db(connection.alias, [f.attname for f in _TASK_FIELDS], values)
    task.campaign = campaign
    if task.caption_id is not None and caption_text is not None:
        task.caption = Caption.from_db(connection.alias, ["id", "image_id", "text"],
                                       [task.caption_id, task.image_id, caption_text])
    return task


def _live_reservation_pg(campaign, worker, now) -> Reservation | None:
    sql = _sql("live", lambda: f"""
        SELECT r.id, r.assignment_id, r.created_at, r.expires_at, c.text, {_task_columns()}
        FROM {Reservation._meta.db_table} r
        JOIN {Task._meta.db_table} t ON t.id = r.task_id
        LEFT JOIN {Caption._meta.db_table} c ON c.id = t.caption_id
        WHERE r.worker_id = %s AND r.campaign_id = %s AND r.expires_at > %s
        ORDER BY r.created_at LIMIT 1""")
    with hot_cursor() as cursor:
        cursor.execute(sql, [worker.pk, campaign.pk, now])
        row = cursor.fetchone()
    if row is None:
        return None
    task = _task_from_row(row[5:], campaign, row[4])
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


def settle_stage(campaign: Campaign, membership: Membership, role: str) -> None:
    now = timezone.now()
    if role == Task.Role.TRAINING:
        membership.training_done_at = now
        Membership.objects.filter(pk=membership.pk).update(training_done_at=now)
        return
    total = campaign.tasks.filter(role=Task.Role.QUALIFICATION).count()
    correct = Vote.objects.filter(campaign=campaign, worker_id=membership.worker_id,
                                  role=Task.Role.QUALIFICATION, correct=True).count()
    score = correct / total if total else 1.0
    membership.qualification_score = score
    membership.qualified = score >= (campaign.qualification_pass_mark or 0.0)
    Membership.objects.filter(pk=membership.pk).update(qualification_score=score, qualified=membership.qualified)


def next_task(campaign: Campaign, worker: Worker, membership: Membership | None = None) -> Served:
    """Reserve the worker's next task: their live reservation if they hold one (a reload shows the
    same task), else training, qualification, maybe a gold item, else the best open task."""
    if campaign.status != Campaign.Status.RUNNING:
        raise RoutingError(f"This campaign is {campaign.get_status_display().lower()}.", "not_running", 409)
    membership = membership or membership_for(campaign, worker)
    now = timezone.now()
    live = _live_reservation(campaign, worker, now)
    if live is not None:
        return Served(live, live.task, _stage_for_role(live.task.role))
    ensure_assignment(membership)
    special = _special_roles(campaign, membership)
    if membership.training_done_at is None and Task.Role.TRAINING not in special:
        # No training in this campaign when the worker starts: they are past it for good, so
        # later fetches skip the check (training comes before the first real task, not after).
        settle_stage(campaign, membership, Task.Role.TRAINING)
    for role in (Task.Role.TRAINING, Task.Role.QUALIFICATION):
        stage = stage_of(campaign, membership, special)
        if stage == "failed":
            return Served(None, None, "failed", "You did not reach the qualification test's pass mark.")
        if stage == _stage_for_role(role):
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
        served = _claim_real(campaign, worker, membership, now)
        if served is not None:
            return served
        if attempt == 0 and not sweep_expired(campaign, now=now):
            break
    return Served(None, None, "done", "There are no more tasks for you in this campaign. Thank you!")


def _stage_for_role(role: str) -> str:
    return {"training": "training", "qualification": "qualification"}.get(role, "work")


def _claim_real(campaign, worker, membership, now) -> Served | None:
    if connection.vendor == "postgresql":
        return _claim_real_pg(campaign, worker, membership, now)
    with transaction.atomic():
        qs = (Task.objects.filter(campaign=campaign, role=Task.Role.REAL, status=Task.Status.OPEN,
                                  votes_required__gt=F("votes_count") + F("reserved_count"))
              .exclude(Exists(Vote.objects.filter(task=OuterRef("pk"), worker=worker)))
              .exclude(Exists(Reservation.objects.filter(task=OuterRef("pk"), worker=worker)))
              .order_by("priority", "pk"))
        if connection.features.has_select_for_update_skip_locked:
            qs = qs.select_for_update(skip_locked=True)
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
    columns = _task_columns()
    last, after = "", ""
    if after_last_vote:
        last = f"""last AS (
            SELECT lt.priority AS priority, lt.id AS id FROM {vote} lv JOIN {task} lt ON lt.id = lv.task_id
            WHERE lv.worker_id = %(worker)s AND lv.campaign_id = %(campaign)s AND lv.role = 'real'
            ORDER BY lv.created_at DESC, lv.id DESC LIMIT 1
        ), """
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
            FOR UPDATE SKIP LOCKED
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
    """


def _outermost(conn) -> bool:
    """True inside a transaction this code opened itself (not a caller's or a test's), where a
    SET LOCAL applies to exactly this transaction."""
    return conn.in_atomic_block and len(conn.atomic_blocks) == 1


def _claim_real_pg(campaign, worker, membership, now) -> Served | None:
    assignment_id = membership.assignment_id
    expires = now + timedelta(seconds=campaign.reservation_seconds)
    params = {"campaign": campaign.pk, "worker": worker.pk, "assignment": assignment_id, "now": now,
              "expires": expires}
    row = None
    for attempt in range(3):
        try:
            with transaction.atomic(), hot_cursor() as cursor:
                if _outermost(connection):
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
                    cursor.execute(_sql("claim_after", lambda: _claim_sql(after_last_vote=True)), params)
                    row = cursor.fetchone()
                if row is None:
                    cursor.execute(_sql("claim", _claim_sql), params)
                    row = cursor.fetchone()
            break
        except IntegrityError:  # the same worker claimed meanwhile (two tabs): pick again
            row = None
    if row is None:
        return None
    reservation_id, caption_text, values = row[0], row[1], row[2:]
    task = _task_from_row(values, campaign, caption_text)
    reservation = Reservation(pk=reservation_id, task=task, worker=worker, campaign=campaign,
                              assignment_id=assignment_id, created_at=now, expires_at=expires)
    reservation._state.adding, reservation._state.db = False, connection.alias
    return Served(reservation, task, "work")


def sweep_expired(campaign: Campaign | None = None, *, now=None) -> int:
    """Return expired reservations' tasks to the pool; the number released."""
    now = now or timezone.now()
    expired = Reservation.objects.filter(expires_at__lte=now)
    if campaign is not None:
        expired = expired.filter(campaign=campaign)
    released = 0
    for task_id in set(expired.values_list("task_id", flat=True)[:5000]):
        with transaction.atomic():
            task = Task.objects.select_for_update().filter(pk=task_id).first()
            if task is None:
                continue
            n, _ = Reservation.objects.filter(task_id=task_id, expires_at__lte=now).delete()
            if n and task.role == Task.Role.REAL:
                Task.objects.filter(pk=task_id).update(reserved_count=max(task.reserved_count - n, 0))
            released += n
    return released


def release(campaign: Campaign, worker: Worker, task_id: int) -> bool:
    """The worker gives a reserved task back (skip)."""
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(pk=task_id, campaign=campaign).first()
        if task is None:
            return False
        n, _ = Reservation.objects.filter(task=task, worker=worker).delete()
        if n and task.role == Task.Role.REAL:
            Task.objects.filter(pk=task.pk).update(reserved_count=max(task.reserved_count - n, 0))
    return bool(n)


# --- votes ------------------------------------------------------------------------------------


@dataclass
class Submitted:
    vote: Vote
    created: bool
    feedback: dict | None = None  # training: expected answer and explanation


def submit_vote(campaign: Campaign, worker: Worker, task_id: int, value, *, seconds: float = 0.0,
                membership: Membership | None = None) -> Submitted:
    """Record the worker's vote on a task they reserved. A replay returns the stored vote."""
    kind = campaign.kind_spec
    try:
        seconds = min(max(float(seconds or 0.0), 0.0), 86400.0)
    except (TypeError, ValueError):
        seconds = 0.0
    if seconds != seconds:  # NaN
        seconds = 0.0
    now = timezone.now()
    with transaction.atomic():
        task, reservation = _lock_task(campaign, worker, task_id)
        if task is None:
            raise RoutingError("No such task in this campaign.", "no_task", 404)
        if reservation is None:
            existing = Vote.objects.filter(task=task, worker=worker).first()
            if existing is not None:  # double click or replay: one vote
                return Submitted(existing, False, _feedback(kind, task, existing))
            raise RoutingError("This task is not reserved to you; fetch the next task.", "not_reserved", 409)
        expired = reservation.expires_at <= now
        if expired:  # committed below, then refused: the task really goes back to the pool
            reservation.delete()
            if task.role == Task.Role.REAL:
                Task.objects.filter(pk=task.pk).update(reserved_count=max(task.reserved_count - 1, 0))
        else:
            vote, caption = _record(campaign, kind, task, worker, reservation, value, seconds, now)
    if expired:
        raise RoutingError("Your reservation of this task expired; it went back to the pool.", "expired", 410)
    if caption is not None and campaign.rate_campaign_id and not vote.quarantined:
        feed_rating_campaign(campaign.rate_campaign, caption)
    return Submitted(vote, True, _feedback(kind, task, vote))


def _lock_task(campaign, worker, task_id):
    """The task row, locked, and the worker's reservation of it, in one query (the reservation
    is read under the task's lock, as every change to it happens under that lock)."""
    if connection.vendor == "postgresql":
        return _lock_task_pg(campaign, worker, task_id)
    mine = Reservation.objects.filter(task=OuterRef("pk"), worker=worker)
    task = (Task.objects.select_for_update().filter(pk=task_id, campaign=campaign)
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
    sql = _sql("lock", lambda: f"""
        SELECT r.id, r.assignment_id, r.created_at, r.expires_at, a.confirmed, {_task_columns()}
        FROM {Task._meta.db_table} t
        LEFT JOIN {Reservation._meta.db_table} r ON r.task_id = t.id AND r.worker_id = %s
        LEFT JOIN {Assignment._meta.db_table} a ON a.id = r.assignment_id
        WHERE t.id = %s AND t.campaign_id = %s
        FOR UPDATE OF t""")
    try:
        task_id = int(task_id)
    except (TypeError, ValueError):
        return None, None
    with hot_cursor() as cursor:
        cursor.execute(sql, [worker.pk, task_id, campaign.pk])
        row = cursor.fetchone()
    if row is None:
        return None, None
    task = _task_from_row(row[5:], campaign)
    if row[0] is None:
        return task, None
    reservation = Reservation(pk=row[0], task=task, worker=worker, campaign=campaign, assignment_id=row[1],
                              created_at=row[2], expires_at=row[3])
    reservation._state.adding, reservation._state.db = False, connection.alias
    reservation.quarantine = row[4] is False
    return task, reservation


def _record(campaign, kind, task, worker, reservation, value, seconds, now=None):
    """Store a vote on a task whose row the caller has locked and that the worker reserved."""
    try:
        clean = kind.validate(value, task)
    except VoteInvalid as exc:
        raise RoutingError(str(exc), "invalid_value", 400) from None
    quarantine = getattr(reservation, "quarantine", False)
    if (connection.vendor == "postgresql" and task.role == Task.Role.REAL and kind.target != "image"
            and not quarantine and not campaign.dynamic_overlap and campaign.priority != Campaign.Priority.ENTROPY):
        return _record_plain_pg(campaign, task, worker, reservation, clean, seconds, now or timezone.now()), None
    correct = None
    if task.role != Task.Role.REAL:
        gold = GoldAnswer.objects.filter(task=task).first()
        if gold is not None:
            correct = kind.is_correct(clean, gold.value, gold.tolerance)
    caption = None
    if kind.target == "image" and task.role == Task.Role.REAL:
        caption = _crowd_caption(campaign, task, worker, reservation, clean["text"])
    vote = Vote.objects.create(task=task, worker=worker, campaign=campaign, assignment_id=reservation.assignment_id,
                               role=task.role, value=clean, correct=correct, seconds=seconds, caption=caption,
                               quarantined=quarantine)
    reservation.delete()
    if task.role == Task.Role.REAL:
        if not quarantine:
            _count_vote(campaign, kind, task)
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
    task, vote, res, member, assignment = (m._meta.db_table for m in (Task, Vote, Reservation, Membership,
                                                                        Assignment))
    return f"""
        WITH v AS (
            INSERT INTO {vote} (task_id, worker_id, campaign_id, assignment_id, role, value, correct, seconds,
                                caption_id, quarantined, created_at, updated_at)
            VALUES (%(task)s, %(worker)s, %(campaign)s, %(assignment)s, 'real', %(value)s::jsonb, NULL,
                    %(seconds)s, NULL, FALSE, %(now)s, %(now)s)
            RETURNING id
        ), r AS (
            DELETE FROM {res} WHERE id = %(reservation)s
        ), t AS (
            UPDATE {task} SET votes_count = %(votes_count)s, reserved_count = %(reserved_count)s,
                              status = %(status)s, done_at = %(done_at)s
            WHERE id = %(task)s
        ), m AS (
            UPDATE {member} SET votes = votes + 1, seconds = seconds + %(seconds)s
            WHERE campaign_id = %(campaign)s AND worker_id = %(worker)s
        ), a AS (
            UPDATE {assignment} SET tasks_done = tasks_done + 1, seconds = seconds + %(seconds)s
            WHERE id = %(assignment)s
        )
        SELECT id FROM v
    """


def _record_plain_pg(campaign, task, worker, reservation, clean, seconds, now) -> Vote:
    """The common vote (a real task, fixed overlap, not a written caption) in one statement: the
    vote, the reservation's delete and every counter, with the task row locked by the caller, so
    the same invariants hold as on the ORM path."""
    votes_count = task.votes_count + 1
    done = votes_count >= task.votes_required
    params = {"task": task.pk, "worker": worker.pk, "campaign": campaign.pk, "assignment": reservation.assignment_id,
              "value": json.dumps(clean), "seconds": seconds, "now": now, "reservation": reservation.pk,
              "votes_count": votes_count, "reserved_count": max(task.reserved_count - 1, 0),
              "status": Task.Status.DONE if done else task.status, "done_at": now if done else task.done_at}
    with hot_cursor() as cursor:
        cursor.execute(_sql("vote", _plain_vote_sql), params)
        (vote_id,) = cursor.fetchone()
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


def _count_vote(campaign: Campaign, kind, task: Task) -> None:
    """Counters and dynamic overlap, with the task row locked by the caller."""
    votes_count = task.votes_count + 1
    reserved = max(task.reserved_count - 1, 0)
    required = task.votes_required
    update = {"votes_count": votes_count, "reserved_count": reserved}
    labels = None
    if campaign.dynamic_overlap or campaign.priority == Campaign.Priority.ENTROPY:
        labels = [_dynamic_label(kind, v) for v in Vote.objects.filter(
            task=task, quarantined=False, worker__memberships__campaign=campaign, worker__memberships__blocked=False
        ).values_list("value", flat=True)]
        labels = [x for x in labels if x is not None]
    if campaign.dynamic_overlap and labels:
        top = max(labels.count(x) for x in set(labels)) / len(labels)
        floor = min(campaign.votes_per_item, required)
        if votes_count >= floor and top >= campaign.confidence_threshold:
            required = votes_count
        elif votes_count >= required and top < campaign.confidence_threshold:
            required = min(required + 1, max(campaign.max_votes_per_item, campaign.votes_per_item))
        update["votes_required"] = required
    if campaign.priority == Campaign.Priority.ENTROPY and labels:
        update["priority"] = -entropy(labels)
    if votes_count >= required:
        update["status"] = Task.Status.DONE
        update["done_at"] = timezone.now()
    Task.objects.filter(pk=task.pk).update(**update)


def _dynamic_label(kind, value):
    side = getattr(kind, "side", None)
    return side(value) if side else kind.label_of(value)


def entropy(labels) -> float:
    n = len(labels)
    if not n:
        return 0.0
    return -sum((c / n) * math.log2(c / n) for c in (labels.count(x) for x in set(labels)))


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


def edit_vote(campaign: Campaign, worker: Worker, vote_id: int, value) -> Vote:
    """Change a vote within the campaign's edit window; the old value stays in the audit trail."""
    with transaction.atomic():
        vote = Vote.objects.select_for_update().select_related("task").filter(
            pk=vote_id, campaign=campaign, worker=worker).first()
        if vote is None:
            raise RoutingError("No such vote of yours.", "no_vote", 404)
        if timezone.now() - vote.created_at > timedelta(seconds=campaign.edit_window_seconds):
            raise RoutingError("The edit window of this vote has closed.", "edit_closed", 409)
        if vote.role == Task.Role.TRAINING or vote.role == Task.Role.QUALIFICATION:
            raise RoutingError("Training and qualification answers cannot be changed.", "not_editable", 409)
        kind = campaign.kind_spec
        if kind.target == "image":
            raise RoutingError("A written caption cannot be changed; write a new one.", "not_editable", 409)
        try:
            clean = kind.validate(value, vote.task)
        except VoteInvalid as exc:
            raise RoutingError(str(exc), "invalid_value", 400) from None
        if clean != vote.value:
            VoteEdit.objects.create(vote=vote, old_value=vote.value, new_value=clean)
            vote.value = clean
            if vote.role == Task.Role.GOLD:
                gold = GoldAnswer.objects.filter(task=vote.task).first()
                if gold is not None:
                    was, vote.correct = vote.correct, kind.is_correct(clean, gold.value, gold.tolerance)
                    if was != vote.correct:
                        delta = 1 if vote.correct else -1
                        Membership.objects.filter(campaign=campaign, worker=worker).update(
                            gold_correct=F("gold_correct") + delta)
            vote.save(update_fields=["value", "correct", "updated_at"])
    return vote


def last_editable_vote(campaign: Campaign, worker: Worker) -> Vote | None:
    cutoff = timezone.now() - timedelta(seconds=campaign.edit_window_seconds)
    return (Vote.objects.select_related("task", "task__image", "task__caption")
            .filter(campaign=campaign, worker=worker, created_at__gt=cutoff,
                    role__in=(Task.Role.REAL, Task.Role.GOLD))
            .order_by("-created_at").first())


def _held(task: Task) -> int:
    """Slots held by quarantined votes of assignments still waiting for the provider."""
    return (Vote.objects.filter(task=task, quarantined=True, assignment__confirmed=False)
            .exclude(assignment__state=Assignment.State.REJECTED).count())


def block_worker(campaign: Campaign, worker: Worker, *, reason: str = "", blocked: bool = True) -> int:
    """Block (or unblock) a worker: their votes leave the counts and aggregation, their reserved
    and voted tasks go back to the pool. Returns the number of tasks reopened."""
    Membership.objects.update_or_create(campaign=campaign, worker=worker,
                                        defaults={"blocked": blocked, "blocked_reason": reason[:300]})
    task_ids = set(Vote.objects.filter(campaign=campaign, worker=worker, role=Task.Role.REAL)
                   .values_list("task_id", flat=True))
    task_ids |= set(Reservation.objects.filter(campaign=campaign, worker=worker).values_list("task_id", flat=True))
    reopened = 0
    for task_id in sorted(task_ids):
        with transaction.atomic():
            task = Task.objects.select_for_update().get(pk=task_id)
            if blocked:
                Reservation.objects.filter(task=task, worker=worker).delete()
            counted = (Vote.objects.filter(task=task, quarantined=False).exclude(
                worker__memberships__campaign=campaign, worker__memberships__blocked=True).count())
            live = (Reservation.objects.filter(task=task).count() + _held(task)) if task.role == Task.Role.REAL else 0
            status = Task.Status.DONE if counted >= task.votes_required else Task.Status.OPEN
            if status == Task.Status.OPEN and task.status == Task.Status.DONE:
                reopened += 1
            Task.objects.filter(pk=task.pk).update(votes_count=counted, reserved_count=live, status=status,
                                                   done_at=task.done_at if status == Task.Status.DONE else None)
    return reopened


# --- quarantine: external assignments the provider has not confirmed yet ----------------------


def confirm_assignment(assignment: Assignment) -> int:
    """The provider confirmed this assignment (its worker really did this work): its quarantined
    votes now count, each under its task's row lock. Idempotent; returns the votes released."""
    if _discarded(assignment):
        return 0  # its slots went back to the pool when it was discarded
    Assignment.objects.filter(pk=assignment.pk).update(confirmed=True)
    assignment.confirmed = True
    campaign = Campaign.objects.get(pk=assignment.campaign_id)
    kind = campaign.kind_spec
    released = 0
    task_ids = sorted(set(Vote.objects.filter(assignment=assignment, quarantined=True).values_list("task_id", flat=True)))
    for task_id in task_ids:
        with transaction.atomic():
            task = Task.objects.select_for_update().get(pk=task_id)
            vote = Vote.objects.filter(assignment=assignment, task=task, quarantined=True).first()
            if vote is None:  # a concurrent confirm got here first
                continue
            Vote.objects.filter(pk=vote.pk).update(quarantined=False)
            released += 1
            if task.role == Task.Role.REAL:
                _count_vote(campaign, kind, task)  # the held slot becomes a counted vote
        if vote.caption_id and campaign.rate_campaign_id and task.role == Task.Role.REAL:
            feed_rating_campaign(campaign.rate_campaign, vote.caption)
    return released


def _discarded(assignment: Assignment) -> bool:
    return (Assignment.objects.filter(pk=assignment.pk, confirmed=False, state=Assignment.State.REJECTED).exists())


def discard_assignment(assignment: Assignment) -> int:
    """The provider does not know this assignment (forged or mismatched ids): its votes stay
    quarantined for good, never counted, aggregated or paid, and the reservations it holds go
    back to the pool, as do the slots its quarantined votes held. Returns how many votes it had."""
    if _discarded(assignment):
        return Vote.objects.filter(assignment=assignment).count()
    held_by = dict(Vote.objects.filter(assignment=assignment, quarantined=True, role=Task.Role.REAL)
                   .values_list("task_id", "pk"))
    Assignment.objects.filter(pk=assignment.pk).update(confirmed=False, state=Assignment.State.REJECTED,
                                                       reviewed_at=timezone.now())
    assignment.confirmed, assignment.state = False, Assignment.State.REJECTED
    _release_slots(assignment, held_by)
    return Vote.objects.filter(assignment=assignment).count()


def withdraw_votes(assignment: Assignment) -> int:
    """The requester rejected this (confirmed) assignment's work: its votes stop counting (they
    are quarantined, so neither aggregated nor paid) and their tasks go back to the pool to collect
    replacement votes. Idempotent. Returns how many votes were withdrawn now."""
    before = Vote.objects.filter(assignment=assignment, quarantined=False).count()
    _release_slots(assignment, {})
    return before


def _release_slots(assignment: Assignment, held_by: dict) -> None:
    """Un-count the assignment's votes and drop its reservations, each task under its row lock."""
    task_ids = set(Reservation.objects.filter(assignment=assignment).values_list("task_id", flat=True))
    task_ids |= set(Vote.objects.filter(assignment=assignment, quarantined=False).values_list("task_id", flat=True))
    task_ids |= set(held_by)
    for task_id in sorted(task_ids):
        with transaction.atomic():
            task = Task.objects.select_for_update().get(pk=task_id)
            n, _ = Reservation.objects.filter(task=task, assignment=assignment).delete()
            n += 1 if task.pk in held_by else 0
            was_counted = Vote.objects.filter(task=task, assignment=assignment, quarantined=False).update(quarantined=True)
            if task.role != Task.Role.REAL or not (n or was_counted):
                continue
            votes_count = max(task.votes_count - was_counted, 0)
            status = Task.Status.DONE if votes_count >= task.votes_required else Task.Status.OPEN
            Task.objects.filter(pk=task.pk).update(votes_count=votes_count,
                                                   reserved_count=max(task.reserved_count - n, 0), status=status,
                                                   done_at=task.done_at if status == Task.Status.DONE else None)


__all__ = ["confirm_assignment", "discard_assignment", "withdraw_votes", "RoutingError", "Served", "Submitted", "next_task", "submit_vote", "edit_vote", "release",
           "sweep_expired", "block_worker", "worker_for_user", "membership_for", "last_editable_vote",
           "feed_rating_campaign", "entropy", "stage_of"]
