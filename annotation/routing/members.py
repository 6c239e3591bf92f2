"""Workers, memberships and assignments, and the stage a member is in (training, qualification,
work): the helpers every other routing module asks before it serves or counts anything."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from captionlab.roles import ADMIN, ROLES

from ..models import Assignment, Campaign, Membership, Task, Vote, Worker
from .errors import RoutingError
from .hotsql import hot_cursor, instance_from_row, prepared_sql

User = get_user_model()


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
    refuse_blocked(membership, worker)
    return membership


def refuse_blocked(membership: Membership, worker: Worker) -> None:
    if membership.blocked or worker.blocked:
        raise RoutingError("You have been blocked from this campaign.", "blocked", 403)


def member_access(user, campaign_id: int) -> Membership | None:
    """The user's membership of the campaign with its campaign, worker and assignment, and the
    user's roles, in one statement (the work pages ask on every request; on PostgreSQL a prepared
    one), or None when there is no membership yet. The caller refuses a blocked member
    (``refuse_blocked``) once it knows they ask as an annotator."""
    if connection.vendor == "postgresql":
        membership, roles = _member_access_pg(user, campaign_id)
        if membership is not None:
            if user.is_superuser:
                roles.add(ADMIN)
            user._captionlab_roles = roles  # as captionlab.roles.user_roles keeps them
    else:
        membership = (Membership.objects.select_related("campaign", "worker", "assignment")
                      .filter(campaign_id=campaign_id, worker__user_id=user.pk).first())
    if membership is None:
        return None
    worker = membership.worker
    worker.user = user
    user._captionlab_worker = worker  # as worker_for_user keeps it
    return membership


_ACCESS_MODELS = (Membership, Campaign, Worker, Assignment)


def _access_sql() -> str:
    member, campaign, worker, assignment = (m._meta.db_table for m in _ACCESS_MODELS)
    columns = ", ".join(f'{alias}."{f.column}"' for alias, model in zip("mcwa", _ACCESS_MODELS)
                        for f in model._meta.concrete_fields)
    groups = User.groups.through._meta.db_table
    group = User.groups.field.related_model._meta.db_table
    role_flags = ", ".join(
        f"EXISTS (SELECT 1 FROM {groups} ug JOIN {group} g ON g.id = ug.group_id "  # noqa: S608
        f"WHERE ug.user_id = %(user)s AND g.name = '{role}')" for role in ROLES)
    return f"""
        SELECT {columns}, {role_flags}
        FROM {member} m JOIN {worker} w ON w.id = m.worker_id JOIN {campaign} c ON c.id = m.campaign_id
             LEFT JOIN {assignment} a ON a.id = m.assignment_id
        WHERE m.campaign_id = %(campaign)s AND w.user_id = %(user)s
    """  # noqa: S608


def _member_access_pg(user, campaign_id: int) -> tuple[Membership | None, set]:
    with hot_cursor() as cursor:
        cursor.execute(prepared_sql("member_access", _access_sql), {"campaign": campaign_id, "user": user.pk})
        row = cursor.fetchone()
    if row is None:
        return None, set()
    parts, start = [], 0
    for model in _ACCESS_MODELS:
        end = start + len(model._meta.concrete_fields)
        parts.append(row[start:end])
        start = end
    membership, campaign, worker = (instance_from_row(model, values) for model, values in zip(_ACCESS_MODELS[:3], parts))
    membership.campaign, membership.worker = campaign, worker
    membership.assignment = instance_from_row(Assignment, parts[3]) if parts[3][0] is not None else None
    return membership, {role for role, flag in zip(ROLES, row[start:]) if flag}


def ensure_assignment(membership: Membership) -> Assignment:
    assignment = membership.assignment
    if assignment is None or assignment.state != Assignment.State.ACTIVE:
        assignment = Assignment.objects.create(campaign_id=membership.campaign_id, worker_id=membership.worker_id)
        Membership.objects.filter(pk=membership.pk).update(assignment=assignment)
        membership.assignment = assignment
    return assignment


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


def campaign_special_roles(campaign: Campaign, membership: Membership) -> set:
    """The special roles the campaign has tasks of, in one query, and none at all once the member
    is past both stages (the common case on the hot path)."""
    if membership.training_done_at is not None and (campaign.qualification_pass_mark is None
                                                    or membership.qualified is not None):
        return set()
    return set(Task.objects.filter(campaign=campaign, role__in=(Task.Role.TRAINING, Task.Role.QUALIFICATION))
               .order_by().values_list("role", flat=True).distinct())


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


def stage_for_role(role: str) -> str:
    return {"training": "training", "qualification": "qualification"}.get(role, "work")
