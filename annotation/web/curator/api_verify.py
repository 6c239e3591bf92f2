"""Applying a verify-rewrite campaign's verdicts over the API (curators and admins only):

    POST /api/campaigns/<id>/apply-verdicts/ -> {"keep", "fix", "drop", "unchanged", "no_consensus"}

The same service as the campaign page's button and ``manage.py campaign apply-verdicts``
(``annotation.verify_rewrites.verdicts_apply``); running it twice changes nothing the second time.
"""
from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from annotation.models import Campaign
from annotation.services import CampaignError
from annotation.verify_rewrites import verdicts_apply
from captionlab.roles import IsCurator

from .api import campaign_error

_COUNTS = inline_serializer("VerdictCounts", {
    "keep": serializers.IntegerField(help_text="decisions kept as the annotators confirmed"),
    "fix": serializers.IntegerField(help_text="decisions kept with the annotators' corrected rewrite"),
    "drop": serializers.IntegerField(help_text="decisions overridden to drop"),
    "unchanged": serializers.IntegerField(help_text="decisions that already held their verdict"),
    "no_consensus": serializers.IntegerField(help_text="items without a consensus yet (ties, too few votes)"),
})


@extend_schema(request=None, responses={200: _COUNTS}, summary="Apply a verify-rewrite campaign's verdicts to "
               "its run's decisions", tags=["campaigns"], operation_id="campaigns_apply_verdicts")
@api_view(["POST"])
@permission_classes([IsCurator])
def apply_verdicts(request, campaign_id: int):
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        raise NotFound("No such campaign.")
    try:
        counts = verdicts_apply(campaign=campaign, user=request.user)
    except CampaignError as exc:
        raise campaign_error(exc) from None
    return Response(counts)


urlpatterns = [
    path("campaigns/<int:campaign_id>/apply-verdicts/", apply_verdicts, name="api-campaign-apply-verdicts"),
]
