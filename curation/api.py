"""JSON API of the curation app (collections, images, captions, imports).

Every endpoint needs the curator role. Query filters are whitelisted per endpoint: a parameter
that is not listed is refused with 400 rather than passed to the ORM, so a caller cannot filter
on (and so probe) fields such as a user's password hash through a relation.
"""
from django.db.models import Count, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from captionlab.roles import IsCurator

from . import services
from .errors import IngestError
from .models import Caption, Collection, Image, ImportJob
from .serializers import (
    CaptionSerializer,
    CollectionSerializer,
    ImageSerializer,
    ImportCreateSerializer,
    ImportIssueSerializer,
    ImportJobSerializer,
)

RESERVED_PARAMS = {"page", "page_size", "ordering", "format"}


def int_param(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError("must be an integer") from None


def str_param(value):
    return value


class WhitelistFilterMixin:
    """Filters from ``filters = {param: (orm lookup, parser)}`` and ordering from ``orderings``."""

    filters: dict = {}
    orderings: tuple = ("id",)

    def filter_queryset(self, queryset):
        params = self.request.query_params
        unknown = sorted(set(params) - set(self.filters) - RESERVED_PARAMS)
        if unknown:
            raise ValidationError({
                "detail": f"unknown filter(s): {', '.join(unknown)}",
                "allowed": sorted(self.filters),
            })
        for name, (lookup, parse) in self.filters.items():
            if name in params:
                try:
                    value = parse(params[name])
                    queryset = queryset.filter(lookup(value) if callable(lookup) else Q(**{lookup: value}))
                except ValueError as exc:
                    raise ValidationError({name: str(exc)}) from None
        ordering = params.get("ordering")
        if ordering:
            if ordering.lstrip("-") not in self.orderings:
                raise ValidationError({"ordering": f"choose one of {', '.join(self.orderings)} (prefix - to reverse)"})
            queryset = queryset.order_by(ordering)
        return queryset


def filter_params(filters: dict) -> list[OpenApiParameter]:
    return [
        OpenApiParameter(name, OpenApiTypes.INT if parse is int_param else
                         OpenApiTypes.BOOL if getattr(parse, "__name__", "") == "_bool" else OpenApiTypes.STR,
                         description=lookup.__doc__ if callable(lookup) else lookup)
        for name, (lookup, parse) in filters.items()
    ]


COLLECTION_FILTERS = {"name": ("name__icontains", str_param), "source_kind": ("source_kind", str_param), "language": ("language", str_param)}
IMAGE_FILTERS = {
    "collection": ("collection_id", int_param), "status": ("status", str_param), "format": ("format", str_param),
    "sha256": ("sha256", str_param), "external_id": ("external_id", str_param), "import_job": ("import_job_id", int_param),
    "min_width": ("width__gte", int_param), "min_height": ("height__gte", int_param),
}
CAPTION_FILTERS = {
    "image": ("image_id", int_param), "collection": ("image__collection_id", int_param), "origin": ("origin", str_param),
    "language": ("language", str_param), "source": ("source", str_param), "import_job": ("import_job_id", int_param),
    "parent": ("parent_id", int_param), "q": ("text__icontains", str_param),
}
IMPORT_FILTERS = {"collection": ("collection_id", int_param), "kind": ("kind", str_param), "status": ("status", str_param)}


@extend_schema_view(list=extend_schema(parameters=filter_params(COLLECTION_FILTERS)))
class CollectionViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = CollectionSerializer
    permission_classes = [IsCurator]
    filters = COLLECTION_FILTERS
    orderings = ("id", "name", "created_at")

    def get_queryset(self):
        return Collection.objects.annotate(
            image_count=Count("images", distinct=True), caption_count=Count("images__captions")
        ).order_by("name")

    def perform_create(self, serializer):
        data = dict(serializer.validated_data)
        try:
            serializer.instance = services.collection_create(user=self.request.user, **data)
        except IngestError as exc:
            raise ValidationError({"name": exc.message}) from None
        serializer.instance.image_count = serializer.instance.caption_count = 0


@extend_schema_view(list=extend_schema(parameters=filter_params(IMAGE_FILTERS)))
class ImageViewSet(WhitelistFilterMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = ImageSerializer
    permission_classes = [IsCurator]
    filters = IMAGE_FILTERS
    orderings = ("id", "created_at", "width", "height", "file_size")

    def get_queryset(self):
        return Image.objects.annotate(caption_count=Count("captions")).prefetch_related("topics__artifact").order_by("pk")


@extend_schema_view(list=extend_schema(parameters=filter_params(CAPTION_FILTERS)))
class CaptionViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = CaptionSerializer
    permission_classes = [IsCurator]
    filters = CAPTION_FILTERS
    orderings = ("id", "created_at", "import_line")

    def get_queryset(self):
        return Caption.objects.select_related("parent").order_by("pk")

    def perform_create(self, serializer):
        text = (serializer.validated_data.get("text") or "").strip()
        if not text:
            raise ValidationError({"text": "The caption is empty."})
        serializer.save(text=text, source=f"api:{self.request.user.get_username()}")


@extend_schema_view(list=extend_schema(parameters=filter_params(IMPORT_FILTERS)))
class ImportJobViewSet(WhitelistFilterMixin, viewsets.ReadOnlyModelViewSet):
    """Imports. POST a multipart form (collection, kind, file, options) to start one; poll its
    ``percent`` and ``status``; read its report of skipped rows at ``/imports/{id}/report/``."""

    serializer_class = ImportJobSerializer
    permission_classes = [IsCurator]
    parser_classes = [MultiPartParser, FormParser, JSONParser]
    filters = IMPORT_FILTERS
    orderings = ("id", "created_at")

    def get_queryset(self):
        return ImportJob.objects.annotate(issue_count=Count("issues")).order_by("-created_at")

    @extend_schema(request={"multipart/form-data": ImportCreateSerializer}, responses={202: ImportJobSerializer})
    def create(self, request):
        form = ImportCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            job = services.import_create(
                collection=data["collection"], kind=data["kind"], upload=data["file"],
                options=data.get("options") or {}, user=request.user,
            )
        except IngestError as exc:
            raise ValidationError({"file": exc.message}) from None
        job.issue_count = job.issues.count()
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=ImportIssueSerializer(many=True), parameters=[OpenApiParameter("code", str)])
    @action(detail=True, methods=["get"])
    def report(self, request, pk=None):
        job = self.get_object()
        issues = job.issues.all()
        code = request.query_params.get("code")
        if code:
            issues = issues.filter(code=code)
        page = self.paginate_queryset(issues)
        return self.get_paginated_response(ImportIssueSerializer(page, many=True).data)

    def filter_queryset(self, queryset):
        if self.action == "report":
            return queryset
        return super().filter_queryset(queryset)


class ObtainTokenView(ObtainAuthToken):
    """Exchange a username and password for an API token (send it as ``Authorization: Token <key>``)."""

    serializer_class = ObtainAuthToken.serializer_class

    def get_serializer_context(self):
        # django-axes marks a locked-out attempt on the request it is given and its middleware reads the
        # mark from Django's request: hand the serializer that one, not DRF's wrapper, so a locked-out
        # caller gets the 429 instead of a plain "unable to log in".
        return {**super().get_serializer_context(), "request": self.request._request}

    def post(self, request, *args, **kwargs):
        from captionlab.tokens import token_for

        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response({"token": token_for(serializer.validated_data["user"]).key})


