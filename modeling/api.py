"""JSON API of the modeling app: training runs (list, create, retrieve, cancel) and model versions
(list, retrieve, activate). Curator role everywhere; query filters are whitelisted (unknown -> 400)."""
from django.urls import include, path
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter

from captionlab.roles import IsCurator
from curation.api import WhitelistFilterMixin, _filter_params, _int, _str

from . import engine, registry
from .models import ModelVersion, TrainingRun
from .serializers import ModelVersionSerializer, TrainingRunCreateSerializer, TrainingRunSerializer
from .trainers.base import TrainingError

RUN_FILTERS = {"kind": ("kind", _str), "status": ("status", _str), "release": ("release_id", _int),
               "campaign": ("campaign_id", _int)}


def _bool(value):
    lowered = str(value).lower()
    if lowered not in ("true", "false", "1", "0"):
        raise ValueError("must be true or false")
    return lowered in ("true", "1")


VERSION_FILTERS = {"kind": ("kind", _str), "active": ("active", _bool)}


@extend_schema_view(list=extend_schema(parameters=_filter_params(RUN_FILTERS)))
class TrainingRunViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [IsCurator]
    filters = RUN_FILTERS
    orderings = ("id", "created_at", "status")

    def get_queryset(self):
        return TrainingRun.objects.select_related("created_by", "model_version").order_by("-pk")

    def get_serializer_class(self):
        return TrainingRunCreateSerializer if self.action == "create" else TrainingRunSerializer

    @extend_schema(request=TrainingRunCreateSerializer, responses=TrainingRunSerializer)
    def create(self, request, *args, **kwargs):
        from annotation.models import Campaign
        from curation.models import Release

        serializer = TrainingRunCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        release = campaign = None
        if data.get("release") is not None:
            release = Release.objects.filter(pk=data["release"]).first()
            if release is None:
                raise ValidationError({"release": f"no release {data['release']}"})
            if not release.frozen:
                raise ValidationError({"release": "the release is not frozen"})
        if data.get("campaign") is not None:
            campaign = Campaign.objects.filter(pk=data["campaign"]).first()
            if campaign is None:
                raise ValidationError({"campaign": f"no campaign {data['campaign']}"})
        try:
            run = engine.create_run(data["trainer"], data.get("config") or {}, release=release, campaign=campaign,
                                    user=request.user, name=data.get("name") or "")
        except TrainingError as exc:
            raise ValidationError({"detail": str(exc), "code": exc.code}) from None
        engine.enqueue(run)
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=TrainingRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        if run.finished:
            raise ValidationError({"detail": f"the run is already {run.status}"})
        return Response(TrainingRunSerializer(engine.cancel(run)).data)


@extend_schema_view(list=extend_schema(parameters=_filter_params(VERSION_FILTERS)))
class ModelVersionViewSet(WhitelistFilterMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [IsCurator]
    serializer_class = ModelVersionSerializer
    filters = VERSION_FILTERS
    orderings = ("id", "version", "created_at")

    def get_queryset(self):
        return ModelVersion.objects.select_related("activated_by", "run").order_by("kind", "-version")

    @extend_schema(request=None, responses=ModelVersionSerializer)
    @action(detail=True, methods=["post"])
    def activate(self, request, pk=None):
        return Response(ModelVersionSerializer(registry.activate(self.get_object(), request.user)).data)


router = DefaultRouter()
router.register("training-runs", TrainingRunViewSet, basename="api-training-run")
router.register("model-versions", ModelVersionViewSet, basename="api-model-version")
urlpatterns = [path("", include(router.urls))]
