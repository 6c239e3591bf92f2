"""Workers, memberships and assignments, and the stage a member is in (training, qualification,
work): the helpers every other routing module asks before it serves or counts anything."""
from __future__ import annotations

from django.utils import timezone

from ..models import Assignment, Campaign, Membership, Task, Vote, Worker
from .errors import RoutingError


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


def _stage_for_role(role: str) -> str:
    return {"training": "training", "qualification": "qualification"}.get(role, "work")
