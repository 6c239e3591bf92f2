"""The in-house provider: the platform's own annotators, logged in. Nothing to publish elsewhere,
nothing to pay; approvals are no-ops and every assignment is confirmed from the start."""
from __future__ import annotations

from django.db.models import F

from .. import routing
from ..models import Assignment, Campaign, Membership, ProviderJob, Worker
from .base import CrowdProvider, register


class InHouseProvider(CrowdProvider):
    name = "inhouse"
    label = "In-house annotators"
    has_api = False

    def _status(self, campaign: Campaign, status: str) -> None:
        Campaign.objects.filter(pk=campaign.pk).update(status=status)
        campaign.status = status

    def publish(self, campaign, *, progress=None) -> list[ProviderJob]:
        self._status(campaign, Campaign.Status.RUNNING)
        return []

    def pause(self, campaign) -> None:
        self._status(campaign, Campaign.Status.PAUSED)

    def extend(self, campaign, *, extra_assignments: int = 0, extra_seconds: int = 0) -> None:
        if campaign.status == Campaign.Status.FINISHED:
            self._status(campaign, Campaign.Status.RUNNING)
        if extra_assignments:
            campaign.tasks.filter(role="real").update(votes_required=F("votes_required") + extra_assignments,
                                                      status="open", done_at=None)

    def finish(self, campaign) -> None:
        self._status(campaign, Campaign.Status.FINISHED)

    def pull_submissions(self, campaign):
        return []

    def approve(self, assignment: Assignment, feedback: str = "") -> None:
        return None

    def reject(self, assignment: Assignment, feedback: str) -> None:
        return None

    def bonus(self, assignment: Assignment, amount_cents: int, reason: str, token: str) -> None:
        return None

    def block(self, worker: Worker, reason: str) -> None:
        for membership in Membership.objects.filter(worker=worker).select_related("campaign"):
            routing.block_worker(membership.campaign, worker, reason=reason)

    def qualify(self, campaign, worker, passed: bool) -> None:
        Membership.objects.update_or_create(campaign=campaign, worker=worker, defaults={"qualified": passed})


register(InHouseProvider())
