"""A campaign's per-item results over the API (curators and admins only), the same rows and columns
as the results page and ``manage.py campaign_results`` (``annotation.results``):

    GET /api/campaigns/<id>/results/                  -> {"count", "page", "pages", "method", "columns", "results"}
    GET /api/campaigns/<id>/results/<csv|json|parquet>/ -> the file, every row after the filters

Filters (query parameters): ``method``, ``consensus``, ``tie`` (true/false), ``min_votes``,
``confidence_min``, ``confidence_max``, ``q`` (text search); ``page`` and ``page_size`` (at most
500) for the JSON list. A bad value is a 400 that names the parameter.
"""
from __future__ import annotations

from django.http import HttpResponse
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from annotation import results
from annotation.models import Campaign
from captionlab.roles import IsCurator

MAX_PAGE_SIZE = 500

FILTERS = [
    OpenApiParameter("method", OpenApiTypes.STR, description="aggregation method (default: the campaign's first)"),
    OpenApiParameter("consensus", OpenApiTypes.STR, description="only rows with this consensus"),
    OpenApiParameter("tie", OpenApiTypes.BOOL, description="only items whose top labels tie"),
    OpenApiParameter("min_votes", OpenApiTypes.INT, description="only items with at least this many votes"),
    OpenApiParameter("confidence_min", OpenApiTypes.NUMBER, description="lowest confidence"),
    OpenApiParameter("confidence_max", OpenApiTypes.NUMBER, description="highest confidence"),
    OpenApiParameter("q", OpenApiTypes.STR, description="text in the caption, the consensus or the image id"),
]

_ROW_FIELDS = {
    "task_id": serializers.IntegerField(), "part": serializers.CharField(), "image_id": serializers.IntegerField(),
    "image_external_id": serializers.CharField(), "caption_id": serializers.IntegerField(allow_null=True),
    "caption_text": serializers.CharField(), "votes": serializers.IntegerField(),
    "consensus": serializers.CharField(allow_null=True), "confidence": serializers.FloatField(allow_null=True),
    "tie": serializers.BooleanField(), "method": serializers.CharField(),
    "vote_counts": serializers.CharField(help_text="JSON object: votes per label (or caption counts)"),
    "consensus_caption_id": serializers.IntegerField(allow_null=True),
}
_PAGE = inline_serializer("ResultPage", {
    "count": serializers.IntegerField(), "page": serializers.IntegerField(), "pages": serializers.IntegerField(),
    "method": serializers.CharField(), "columns": serializers.ListField(child=serializers.CharField()),
    "results": inline_serializer("ResultRow", _ROW_FIELDS, many=True),
})


def _campaign(campaign_id: int) -> Campaign:
    campaign = Campaign.objects.select_related("rate_campaign").filter(pk=campaign_id).first()
    if campaign is None:
        raise NotFound("No such campaign.")
    return campaign


def _rows(request, campaign):
    try:
        return results.results_rows(campaign, method=request.query_params.get("method") or None,
                                    filters=results.parse_filters(request.query_params))
    except results.ResultsError as exc:
        raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from None


def _positive(request, name: str, default: int, most: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: [f"“{raw}” is not a whole number."]}) from None
    if not 1 <= value <= most:
        raise ValidationError({name: [f"{name} is between 1 and {most}."]})
    return value


@extend_schema(parameters=FILTERS + [OpenApiParameter("page", OpenApiTypes.INT),
                                     OpenApiParameter("page_size", OpenApiTypes.INT)],
               responses={200: _PAGE}, summary="Per-item results of a campaign", tags=["campaigns"],
               operation_id="campaigns_results_list")
@api_view(["GET"])
@permission_classes([IsCurator])
def campaign_results(request, campaign_id: int):
    campaign = _campaign(campaign_id)
    method, rows = _rows(request, campaign)
    size = _positive(request, "page_size", 50, MAX_PAGE_SIZE)
    pages = max((len(rows) + size - 1) // size, 1)
    page = _positive(request, "page", 1, pages)
    chunk = rows[(page - 1) * size: page * size]
    return Response({"count": len(rows), "page": page, "pages": pages, "method": method,
                     "columns": list(results.COLUMNS), "results": chunk})


@extend_schema(parameters=FILTERS + [OpenApiParameter("fmt", OpenApiTypes.STR, OpenApiParameter.PATH,
                                                      enum=list(results.FORMATS))],
               responses={(200, "application/octet-stream"): OpenApiResponse(
                   OpenApiTypes.BINARY, description="the results as CSV, JSON or Parquet")},
               summary="Download a campaign's per-item results", tags=["campaigns"],
               operation_id="campaigns_results_file")
@api_view(["GET"])
@permission_classes([IsCurator])
def campaign_results_file(request, campaign_id: int, fmt: str):
    campaign = _campaign(campaign_id)
    if fmt not in results.FORMATS:
        raise NotFound("The format is csv, json or parquet.")
    method, rows = _rows(request, campaign)
    response = HttpResponse(results.export_bytes(campaign, fmt, method, rows), content_type=results.FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{results.filename(campaign, fmt)}"'
    return response


urlpatterns = [
    path("campaigns/<int:campaign_id>/results/", campaign_results, name="api-campaign-results"),
    path("campaigns/<int:campaign_id>/results/<str:fmt>/", campaign_results_file, name="api-campaign-results-file"),
]
