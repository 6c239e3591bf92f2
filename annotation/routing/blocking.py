"""Blocking workers and settling external assignments: a blocked worker's votes leave the counts;
a provider's confirmation releases quarantined votes, its refusal frees their slots. Each task is
handled in its own transaction under its row lock, tasks in ascending id order."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from ..models import Assignment, Campaign, Membership, Reservation, Task, Vote, Worker
from .counting import count_vote, held
from .submitting import feed_rating_campaign


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
            task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
            if blocked:
                Reservation.objects.filter(task=task, worker=worker).delete()
            counted = (Vote.objects.filter(task=task, quarantined=False).exclude(
                worker__memberships__campaign=campaign, worker__memberships__blocked=True).count())
            live = (Reservation.objects.filter(task=task).count() + held(task)) if task.role == Task.Role.REAL else 0
            status = Task.Status.DONE if counted >= task.votes_required else Task.Status.OPEN
            if status == Task.Status.OPEN and task.status == Task.Status.DONE:
                reopened += 1
            Task.objects.filter(pk=task.pk).update(votes_count=counted, reserved_count=live, status=status,
                                                   done_at=task.done_at if status == Task.Status.DONE else None)
    return reopened


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
            task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
            vote = Vote.objects.filter(assignment=assignment, task=task, quarantined=True).first()
            if vote is None:  # a concurrent confirm got here first
                continue
            Vote.objects.filter(pk=vote.pk).update(quarantined=False)
            released += 1
            if task.role == Task.Role.REAL:
                count_vote(campaign, kind, task)  # the held slot becomes a counted vote
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
            task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
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
