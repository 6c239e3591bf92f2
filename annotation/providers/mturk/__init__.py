"""Amazon Mechanical Turk through boto3's ``mturk`` client.

AWS's MTurk API reference states that Mechanical Turk took no new requesters after 2026-07-30 and
closes permanently on 2026-09-30. The provider therefore talks to whatever endpoint
``settings.MTURK_ENDPOINT_URL`` names (the requester sandbox by default; tests point it at a local
server that answers the same JSON protocol).

A campaign becomes HITs whose ExternalQuestion frames the platform's own page (``mturk-task``):
one HIT per batch of ``tasks_per_assignment`` items, each with ``max_assignments`` assignments, so
every item can get its votes from distinct workers. Publishing is idempotent: each batch is a
``ProviderJob`` row whose deterministic ``unique_token`` is the HIT's ``UniqueRequestToken`` (and
``RequesterAnnotation``), so a retried batch never creates a second HIT. Money goes through
``annotation.providers.money``: a HIT's rewards (max assignments x reward, plus MTurk's fee) are
committed before it is created, an approved assignment draws its reward from that commitment and
is marked paid once MTurk accepted the approval.

Throttling and network errors are retried here with exponential backoff (botocore's own retries
are off, so this backoff is the one that runs; ``backoff_base`` is a parameter so tests do not
sleep). Credential problems become a ``ProviderError`` with code ``credentials`` and a message a
curator can act on.
"""
from __future__ import annotations

from django.http import HttpResponse
from django.template.loader import render_to_string

from ...models import Assignment, Campaign
from .. import money
from ..base import CrowdProvider, register
from .assignments import AssignmentReviewMixin
from .client import CREDENTIAL_CODES, RETRYABLE_CODES, MTurkClientMixin, log, make_client
from .frame import framable, mturk_session, valid_submit_to
from .layout import (
    DEFAULTS,
    EXTERNAL_QUESTION_XSD,
    ID_RE,
    PREVIEW_ASSIGNMENT_ID,
    QUAL_APPROVAL_RATE,
    QUAL_APPROVED_HITS,
    QUAL_LOCALE,
    SUBMIT_HOSTS,
    HitLayoutMixin,
    external_question,
    external_url,
    hits_needed,
    int_config,
    money_str,
    qualification_requirements,
)
from .publishing import HitPublishingMixin

__all__ = ["MTurkProvider", "make_client", "external_url", "external_question", "qualification_requirements",
           "hits_needed", "DEFAULTS", "EXTERNAL_QUESTION_XSD", "PREVIEW_ASSIGNMENT_ID", "QUAL_APPROVAL_RATE",
           "QUAL_APPROVED_HITS", "QUAL_LOCALE", "RETRYABLE_CODES", "CREDENTIAL_CODES", "SUBMIT_HOSTS", "ID_RE",
           "log", "money_str", "int_config"]


class MTurkProvider(MTurkClientMixin, HitLayoutMixin, HitPublishingMixin, AssignmentReviewMixin, CrowdProvider):
    name = "mturk"
    label = "Amazon Mechanical Turk"
    has_api = True

    # -- money -------------------------------------------------------------------------------------
    def fee_cents(self, amount_cents: int, *, kind: str, max_assignments: int = 1, campaign=None) -> int:
        return money.fee_cents(self.name, amount_cents, kind, max_assignments, campaign)

    def estimate(self, campaign: Campaign) -> dict:
        """What publishing would create and cost (for the provider page)."""
        layout = self.layout(campaign)
        hits = len(self.batches(campaign, layout["tasks_per_assignment"]))
        per_hit = layout["reward"] * layout["max_assignments"]
        fee = money.fee_cents(self.name, per_hit, "reward", layout["max_assignments"], campaign)
        return {"hits": hits, "assignments": hits * layout["max_assignments"], "cost_cents": hits * (per_hit + fee)}

    # -- the worker's last step ---------------------------------------------------------------------
    def finish_assignment(self, request, campaign: Campaign, assignment: Assignment) -> HttpResponse:
        """An auto-submitting form that posts the assignmentId to turkSubmitTo/mturk/externalSubmit
        (the votes are stored by then)."""
        info = mturk_session(request, campaign)
        submit_to = valid_submit_to(info.get("turk_submit_to", "")) if info else None
        if not info or submit_to is None or info.get("assignment_id") != assignment.provider_assignment_id:
            html = render_to_string("annotation/mturk/message.html", {
                "campaign": campaign, "title": "Cannot submit to MTurk",
                "message": "This page does not know where to submit your HIT. Open the HIT again from MTurk."},
                request=request)
            return framable(HttpResponse(html, status=400))
        html = render_to_string("annotation/mturk/submit.html", {
            "campaign": campaign, "action": submit_to + "/mturk/externalSubmit",
            "assignment_id": assignment.provider_assignment_id, "tasks_done": assignment.tasks_done,
        }, request=request)
        return framable(HttpResponse(html))


register(MTurkProvider())
