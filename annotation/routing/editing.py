"""Undo: a vote changed within the campaign's edit window, with the old value kept in the audit
trail (``VoteEdit``)."""
from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ..kinds import VoteInvalid
from ..models import Campaign, GoldAnswer, Membership, Task, Vote, VoteEdit, Worker
from .errors import RoutingError


def edit_vote(campaign: Campaign, worker: Worker, vote_id: int, value) -> Vote:
    """Change a vote within the campaign's edit window; the old value stays in the audit trail."""
    with transaction.atomic():
        vote = Vote.objects.select_for_update(no_key=True, of=("self",)).select_related("task").filter(
            pk=vote_id, campaign=campaign, worker=worker).first()
        if vote is None:
            raise RoutingError("No such vote of yours.", "no_vote", 404)
        if timezone.now() - vote.created_at > timedelta(seconds=campaign.edit_window_seconds):
            raise RoutingError("The edit window of this vote has closed.", "edit_closed", 409)
        if vote.role == Task.Role.TRAINING or vote.role == Task.Role.QUALIFICATION:
            raise RoutingError("Training and qualification answers cannot be changed.", "not_editable", 409)
        kind = campaign.kind_spec
        if not kind.editable:
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
