"""A same-meaning campaign's fit over the API (curators and admins only):

    GET  /api/campaigns/<id>/pairs-fit/  -> the fit: pairs used, ties and single judges left out, messages,
                                            weights, threshold, precision and recall (and the curves)
    POST /api/campaigns/<id>/pairs-fit/  {"drop": false} -> the run's pipeline step with the fitted params

The same service as the campaign's fit page and ``manage.py campaign fit-pairs`` (``annotation.same_meaning``).
"""
from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from annotation.models import Campaign
from annotation.same_meaning import pairs_apply, pairs_fit
from annotation.services import CampaignError
from captionlab.roles import IsCurator

from .api import campaign_error

_APPLY = inline_serializer("PairsFitApply", {"drop": serializers.BooleanField(
    required=False, default=False, help_text="also drop pairs at or above the threshold (later runs)")})


@extend_schema(methods=["GET"], request=None, responses={200: OpenApiResponse(description="the fit")},
               summary="A same-meaning campaign's fitted threshold", tags=["campaigns"],
               operation_id="campaigns_pairs_fit")
@extend_schema(methods=["POST"], request=_APPLY, responses={200: OpenApiResponse(description="the step's params")},
               summary="Apply a same-meaning campaign's fit to its run's pipeline", tags=["campaigns"],
               operation_id="campaigns_pairs_fit_apply")
@api_view(["GET", "POST"])
@permission_classes([IsCurator])
def pairs_fit_view(request, campaign_id: int):
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        raise NotFound("No such campaign.")
    try:
        if request.method == "POST":
            drop = request.data.get("drop", False)
            if not isinstance(drop, bool):
                drop = str(drop).lower() in ("1", "true", "on", "yes")
            return Response(pairs_apply(campaign=campaign, drop=drop, user=request.user))
        return Response(pairs_fit(campaign).as_dict())
    except CampaignError as exc:
        raise campaign_error(exc) from None


urlpatterns = [
    path("campaigns/<int:campaign_id>/pairs-fit/", pairs_fit_view, name="api-campaign-pairs-fit"),
]
