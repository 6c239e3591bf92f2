"""JSON API of search by meaning and duplicate clusters (curator role).

- ``GET /api/collections/{id}/search/?q=&mode=captions|images&k=&model=``
- ``GET /api/collections/{id}/search/?q=&mode=words&page=&per_page=``: captions by words alone (full text,
  paginated, needs no model; ``curation.word_search``)
- ``GET /api/captions/{id}/similar/?k=&model=`` and ``GET /api/images/{id}/similar/?k=&model=``
- ``POST /api/runs/{run}/steps/{step}/clusters/{cluster}/keep/``
  with ``{"keep": "one"|"all", "caption_id"|"image_id"?, "note"?}``

Each view calls one function (``pack.embeddings.search``, ``curation.clusters``). Errors answer
``{"detail": message, "code": code}``: 400 for a bad request, 404 for what is not there, 409 when the data is
not ready (no model registered, no embeddings yet, a model whose files changed); never a 500.
"""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from captionlab.roles import IsCurator
from pack import PackError

from . import clusters
from .errors import IngestError
from .models import Caption, Collection, FilterRun, Image
from .word_search import WordSearchError, search_words

BAD_REQUEST = {"invalid", "wrong_kind"}
PARAMS = {"search": {"q", "mode", "k", "model", "format"}, "words": {"q", "mode", "page", "per_page", "format"},
          "similar": {"k", "model", "format"}}


def _error(exc, status: int | None = None) -> Response:
    code = getattr(exc, "code", "invalid")
    return Response({"detail": exc.message, "code": code}, status=status or (400 if code in BAD_REQUEST else 409))


def _only(request, allowed: set[str]) -> None:
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise ValidationError({"detail": f"unknown parameter(s): {', '.join(unknown)}",
                               "allowed": sorted(allowed - {"format"})})


def _search():
    """pack.embeddings.search, imported by the first search (it brings numpy, which the rest of the
    web does not need)."""
    from pack.embeddings import search

    return search


def _results(results) -> dict:
    return {"query": results.query, "model": results.model, "notes": results.notes, "count": len(results.rows),
            "results": [hit.as_dict() for hit in results.rows]}


SEARCH_MODES = ("captions", "images")  # pack.embeddings.search.MODES (tests/test_import_weight.py)
SIMILAR_PARAMS = [OpenApiParameter("k", OpenApiTypes.INT), OpenApiParameter("model", OpenApiTypes.STR)]
SEARCH_PARAMS = [OpenApiParameter("q", OpenApiTypes.STR, required=True),
                 OpenApiParameter("mode", OpenApiTypes.STR, enum=[*SEARCH_MODES, "words"]), *SIMILAR_PARAMS,
                 OpenApiParameter("page", OpenApiTypes.INT, description="mode=words: the page (from 1)"),
                 OpenApiParameter("per_page", OpenApiTypes.INT, description="mode=words: 1-100, default 25")]


class CollectionSearchView(APIView):
    """Captions by words and meaning (mode=captions), or images for a text (mode=images), best first; or captions
    by words alone, a page at a time (mode=words)."""

    permission_classes = [IsCurator]

    @extend_schema(parameters=SEARCH_PARAMS, responses={200: dict})
    def get(self, request, pk):
        params = request.query_params
        words = params.get("mode") == "words"
        _only(request, PARAMS["words" if words else "search"])
        collection = get_object_or_404(Collection, pk=pk)
        if words:
            try:
                found = search_words(collection, params.get("q", ""), page=params.get("page"),
                                     per_page=params.get("per_page"))
            except WordSearchError as exc:
                return _error(exc, 400)
            return Response(found.as_dict())
        try:
            found = _search().collection_search(collection, params.get("q", ""), mode=params.get("mode", "captions"),
                                             k=params.get("k") or 50, model=params.get("model") or None)
        except PackError as exc:
            return _error(exc)
        return Response(_results(found))


class CaptionSimilarView(APIView):
    """Captions of the same collection nearest in meaning to this one."""

    permission_classes = [IsCurator]

    @extend_schema(parameters=SIMILAR_PARAMS, responses={200: dict})
    def get(self, request, pk):
        _only(request, PARAMS["similar"])
        caption = get_object_or_404(Caption.objects.select_related("image__collection"), pk=pk)
        try:
            found = _search().captions_like(caption, request.query_params.get("k") or 20,
                                         model=request.query_params.get("model") or None)
        except PackError as exc:
            return _error(exc)
        return Response(_results(found))


class ImageSimilarView(APIView):
    """Images of the same collection nearest to this one by a CLIP model's image vectors."""

    permission_classes = [IsCurator]

    @extend_schema(parameters=SIMILAR_PARAMS, responses={200: dict})
    def get(self, request, pk):
        _only(request, PARAMS["similar"])
        image = get_object_or_404(Image.objects.select_related("collection"), pk=pk)
        try:
            found = _search().images_like(image, request.query_params.get("k") or 20,
                                       model=request.query_params.get("model") or None)
        except PackError as exc:
            return _error(exc)
        return Response(_results(found))


class ClusterKeepSerializer(serializers.Serializer):
    keep = serializers.ChoiceField(choices=clusters.KEEP_CHOICES)
    caption_id = serializers.IntegerField(required=False, help_text="keep=one: the caption to keep")
    image_id = serializers.IntegerField(required=False, help_text="keep=one on an image step: the image to keep")
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class ClusterKeepView(APIView):
    """Keep one member of a duplicate cluster and drop the others (default: the one the filter kept), or keep
    them all; recorded as curator overrides."""

    permission_classes = [IsCurator]

    @extend_schema(request=ClusterKeepSerializer, responses={200: dict})
    def post(self, request, run, step, cluster):
        found_run = get_object_or_404(FilterRun, pk=run)
        form = ClusterKeepSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            kept = clusters.cluster_keep(run=found_run, step=step, cluster=cluster, keep=data["keep"],
                                         member_id=data.get("caption_id", data.get("image_id")),
                                         note=data.get("note", ""), user=request.user)
        except IngestError as exc:
            return _error(exc, 404 if exc.code == "not_found" else 400)
        return Response({"cluster": kept.id, "state": kept.state, "kept": kept.kept_now,
                         "members": [{"id": d.member_id, "decision": d.pk, "final_outcome": d.final}
                                     for d in kept.members]})


urlpatterns = [
    path("collections/<int:pk>/search/", CollectionSearchView.as_view(), name="api-collection-search"),
    path("captions/<int:pk>/similar/", CaptionSimilarView.as_view(), name="api-caption-similar"),
    path("images/<int:pk>/similar/", ImageSimilarView.as_view(), name="api-image-similar"),
    path("runs/<int:run>/steps/<int:step>/clusters/<int:cluster>/keep/", ClusterKeepView.as_view(),
         name="api-cluster-keep"),
]
