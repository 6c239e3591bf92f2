"""API of releases (curator role): list, create, retrieve, freeze, items, exports and downloads.

    GET  /api/releases/                                   list
    POST /api/releases/                                   create {name, description?, config, freeze?}
    GET  /api/releases/<id>/                              one release (status, counts, card, hash)
    POST /api/releases/<id>/freeze/                       queue freezing (202)
    GET  /api/releases/<id>/items/                        frozen items, paginated, ?split=
    GET  /api/releases/<id>/exports/                      exports of the release
    POST /api/releases/<id>/exports/                      {format, options} -> 202 (or 200 when reused)
    GET  /api/releases/<id>/exports/<export_id>/          one export (with its last verification)
    DELETE /api/releases/<id>/exports/<export_id>/        the export and its files (204)
    POST /api/releases/<id>/exports/<export_id>/verify/   re-export and verify every sha256 (202)
    GET  /api/releases/<id>/exports/<export_id>/download/ the file (?file= for a shard) or a signed redirect
"""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from captionlab.roles import IsCurator
from curation.api import WhitelistFilterMixin, filter_params, int_param, str_param
from releases.models import Release, ReleaseExport, ReleaseItem

from . import ReleaseError, services
from .by_collection import of_collection
from .views import serve_export_file


class ReleaseSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Release
        fields = ["id", "name", "description", "config", "status", "items_total", "items_done", "counts", "report",
                  "content_hash", "card", "error", "created_by", "created_at", "frozen_at"]
        read_only_fields = fields


class ReleaseCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    config = serializers.DictField(help_text="collections, run, vote_rules, origins, languages, "
                                             "max_captions_per_image, dedup, splits, seed, test_human_verified, "
                                             "missing_image, include_model_captions (model-generated "
                                             "captions are left out unless true; never in the test split)")
    freeze = serializers.BooleanField(required=False, default=False, help_text="queue freezing right away")


class ReleaseItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = ReleaseItem
        fields = ["id", "position", "split", "image", "image_sha256", "image_file", "image_format", "width", "height",
                  "license", "credit", "external_id", "caption", "text", "language", "human_verified", "provenance"]
        read_only_fields = fields


class ReleaseExportSerializer(serializers.ModelSerializer):
    download = serializers.SerializerMethodField()
    downloads = serializers.SerializerMethodField(help_text="[{name, url}]: every file of a done export")

    class Meta:
        model = ReleaseExport
        fields = ["id", "release", "format", "options", "status", "rows_total", "rows_done", "files", "sha256", "size",
                  "report", "error", "attempts", "verification", "created_at", "finished_at", "download", "downloads"]
        read_only_fields = fields

    def get_download(self, obj) -> str | None:
        if obj.status != ReleaseExport.Status.DONE:
            return None
        from django.urls import reverse

        return reverse("api-release-download", args=[obj.release_id, obj.pk])

    def get_downloads(self, obj) -> list[dict]:
        if obj.status != ReleaseExport.Status.DONE:
            return []
        from urllib.parse import quote

        from django.urls import reverse

        base = reverse("api-release-download", args=[obj.release_id, obj.pk])
        return [{"name": f["name"], "url": f"{base}?file={quote(f['name'])}"} for f in obj.files or []]


class ExportCreateSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=ReleaseExport.Format.choices)
    options = serializers.DictField(
        required=False, default=dict,
        help_text='images: "include" (default: images/ shards the annotations reference) or "none" (the manifest '
                  'names the storage); missing_images: "skip" or "fail"; image_archive: "tar" or "zip"; '
                  'shard_size (bytes); samples_per_shard (webdataset)')


def _bad(exc: ReleaseError, default: str):
    return ValidationError({exc.field or default: exc.message})


def _collection(collection_id: int):
    """releases whose config names this collection or one of its filter runs"""
    return of_collection(collection_id)


RELEASE_FILTERS = {"status": ("status", str_param), "name": ("name__icontains", str_param), "collection": (_collection, int_param)}
ITEM_FILTERS = {"split": ("split", str_param)}


@extend_schema_view(list=extend_schema(parameters=filter_params(RELEASE_FILTERS)))
class ReleaseViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = ReleaseSerializer
    permission_classes = [IsCurator]
    filters = RELEASE_FILTERS
    orderings = ("id", "created_at", "name")

    def get_queryset(self):
        return Release.objects.select_related("created_by").order_by("-created_at")

    def filter_queryset(self, queryset):
        if self.action in ("list",):
            return super().filter_queryset(queryset)
        return queryset

    @extend_schema(request=ReleaseCreateSerializer, responses={201: ReleaseSerializer})
    def create(self, request):
        form = ReleaseCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            release = services.release_create(data["name"], data["config"], request.user,
                                               description=data.get("description", ""), freeze=data.get("freeze"))
        except ReleaseError as exc:
            raise _bad(exc, "config") from None
        return Response(ReleaseSerializer(release).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: ReleaseSerializer})
    @action(detail=True, methods=["post"])
    def freeze(self, request, pk=None):
        release = self.get_object()
        try:
            services.release_freeze(release)
        except ReleaseError as exc:
            raise _bad(exc, "status") from None
        release.refresh_from_db()
        return Response(ReleaseSerializer(release).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=ReleaseItemSerializer(many=True), parameters=filter_params(ITEM_FILTERS))
    @action(detail=True, methods=["get"])
    def items(self, request, pk=None):
        release = self.get_object()
        view = _ItemFilter(request)
        items = view.filter_queryset(ReleaseItem.objects.filter(release=release).order_by("position"))
        page = self.paginate_queryset(items)
        return self.get_paginated_response(ReleaseItemSerializer(page, many=True).data)

    @extend_schema(methods=["GET"], responses=ReleaseExportSerializer(many=True))
    @extend_schema(methods=["POST"], request=ExportCreateSerializer,
                   responses={202: ReleaseExportSerializer, 200: ReleaseExportSerializer})
    @action(detail=True, methods=["get", "post"])
    def exports(self, request, pk=None):
        release = self.get_object()
        if request.method == "GET":
            return Response(ReleaseExportSerializer(release.exports.order_by("-created_at"), many=True).data)
        form = ExportCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        before = set(release.exports.values_list("pk", flat=True))
        try:
            export = services.export_create(release, form.validated_data["format"],
                                            form.validated_data.get("options") or {}, request.user)
        except ReleaseError as exc:
            raise _bad(exc, "format") from None
        export.refresh_from_db()
        code = status.HTTP_202_ACCEPTED if export.pk not in before else status.HTTP_200_OK
        return Response(ReleaseExportSerializer(export).data, status=code)

    def _export(self, export_id):
        release = self.get_object()
        try:
            return release.exports.get(pk=export_id)
        except ReleaseExport.DoesNotExist:
            raise NotFound("No such export of this release.") from None

    @extend_schema(methods=["GET"], responses=ReleaseExportSerializer,
                   parameters=[OpenApiParameter("export_id", OpenApiTypes.INT, OpenApiParameter.PATH)])
    @extend_schema(methods=["DELETE"], responses={204: None},
                   parameters=[OpenApiParameter("export_id", OpenApiTypes.INT, OpenApiParameter.PATH)])
    @action(detail=True, methods=["get", "delete"], url_path=r"exports/(?P<export_id>[0-9]+)",
            url_name="export")
    def export(self, request, pk=None, export_id=None):
        export = self._export(export_id)
        if request.method == "GET":
            return Response(ReleaseExportSerializer(export).data)
        try:
            services.export_delete(export)
        except ReleaseError as exc:
            raise _bad(exc, "status") from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: ReleaseExportSerializer},
                   parameters=[OpenApiParameter("export_id", OpenApiTypes.INT, OpenApiParameter.PATH)])
    @action(detail=True, methods=["post"], url_path=r"exports/(?P<export_id>[0-9]+)/verify", url_name="verify")
    def verify(self, request, pk=None, export_id=None):
        export = self._export(export_id)
        try:
            services.export_verify(export)
        except ReleaseError as exc:
            raise _bad(exc, "status") from None
        export.refresh_from_db()
        return Response(ReleaseExportSerializer(export).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[OpenApiParameter("export_id", OpenApiTypes.INT, OpenApiParameter.PATH),
                    OpenApiParameter("file", OpenApiTypes.STR, description="file name; needed for several shards")],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY,
                   302: OpenApiResponse(description="redirect to a signed storage URL (S3)"),
                   404: OpenApiResponse(description="no such export, file, or the export is not done")})
    @action(detail=True, methods=["get"], url_path=r"exports/(?P<export_id>[0-9]+)/download",
            url_name="download")
    def download(self, request, pk=None, export_id=None):
        release = self.get_object()
        try:
            export = release.exports.get(pk=export_id)
        except ReleaseExport.DoesNotExist:
            raise NotFound("No such export of this release.") from None
        from django.http import Http404

        try:
            return serve_export_file(export, request.query_params.get("file"))
        except Http404 as exc:
            raise NotFound(str(exc)) from None


class _ItemFilter(WhitelistFilterMixin):
    filters = ITEM_FILTERS
    orderings = ("position",)

    def __init__(self, request):
        self.request = request
