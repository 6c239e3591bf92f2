"""JSON API of the modeling app: training runs (list, create, retrieve, cancel), model versions
(list, retrieve, activate) and generation jobs (create, list, retrieve their progress). Curator role
everywhere; query filters are whitelisted (unknown -> 400)."""
from django.urls import include, path
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter

from captionlab.roles import IsCurator
from curation.api import WhitelistFilterMixin, filter_params, int_param, str_param

from . import engine, generation_job, groups, registry
from .models import GenerationJob, ModelVersion, TrainingRun
from .serializers import (
    ActivateSerializer,
    ModelVersionSerializer,
    TrainingRunCreateSerializer,
    TrainingRunGroupSerializer,
    TrainingRunSerializer,
)
from .trainers.base import TrainingError

RUN_FILTERS = {"kind": ("kind", str_param), "status": ("status", str_param), "release": ("release_id", int_param),
               "campaign": ("campaign_id", int_param), "group": ("group", str_param)}


def _bool(value):
    lowered = str(value).lower()
    if lowered not in ("true", "false", "1", "0"):
        raise ValueError("must be true or false")
    return lowered in ("true", "1")


VERSION_FILTERS = {"kind": ("kind", str_param), "active": ("active", _bool)}


@extend_schema_view(list=extend_schema(parameters=filter_params(RUN_FILTERS)))
class TrainingRunViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [IsCurator]
    filters = RUN_FILTERS
    orderings = ("id", "created_at", "status")

    def get_queryset(self):
        return TrainingRun.objects.select_related("created_by", "model_version").order_by("-pk")

    def get_serializer_class(self):
        return TrainingRunCreateSerializer if self.action == "create" else TrainingRunSerializer

    @extend_schema(request=TrainingRunCreateSerializer,
                   responses={201: PolymorphicProxySerializer(
                       component_name="TrainingRunCreated", resource_type_field_name=None,
                       serializers=[TrainingRunSerializer, TrainingRunGroupSerializer])})
    def create(self, request, *args, **kwargs):
        from annotation.models import Campaign
        from releases.models import Release

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
            runs = groups.create_repeats(data["trainer"], data.get("config") or {}, data["repeats"], release=release,
                                         campaign=campaign, user=request.user, name=data.get("name") or "")
        except TrainingError as exc:
            raise ValidationError({"detail": str(exc), "code": exc.code}) from None
        for run in runs:
            engine.enqueue(run)
        if len(runs) == 1:
            return Response(TrainingRunSerializer(runs[0]).data, status=status.HTTP_201_CREATED)
        return Response({"group": runs[0].group, "runs": TrainingRunSerializer(runs, many=True).data},
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=TrainingRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        if run.finished:
            raise ValidationError({"detail": f"the run is already {run.status}"})
        return Response(TrainingRunSerializer(engine.cancel(run)).data)

    @extend_schema(request=None, responses=TrainingRunSerializer)
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Queue a failed, cancelled or worker-lost run again; it continues from its last checkpoint."""
        run = self.get_object()
        if not engine.retryable(run):
            raise ValidationError({"detail": f"the run is {run.status} and its worker is alive"})
        return Response(TrainingRunSerializer(engine.retry(run)).data)


@extend_schema_view(list=extend_schema(parameters=filter_params(VERSION_FILTERS)))
class ModelVersionViewSet(WhitelistFilterMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [IsCurator]
    serializer_class = ModelVersionSerializer
    filters = VERSION_FILTERS
    orderings = ("id", "version", "created_at")

    def get_queryset(self):
        return ModelVersion.objects.select_related("activated_by", "run").order_by("kind", "-version")

    @extend_schema(request=ActivateSerializer, responses=ModelVersionSerializer)
    @action(detail=True, methods=["post"])
    def activate(self, request, pk=None):
        """Make the version active; one that does not beat the majority class (a captioner: nearest-neighbour
        retrieval) needs {"force": true} (else 400 with the verdict's figures and code "does_not_beat_majority" or
        "does_not_beat_retrieval")."""
        version = self.get_object()
        serializer = ActivateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            version = registry.activate(version, request.user, force=serializer.validated_data["force"])
        except TrainingError as exc:
            raise ValidationError({"detail": str(exc), "code": exc.code}) from None
        return Response(ModelVersionSerializer(version).data)


class GenerationJobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    percent = serializers.SerializerMethodField()

    class Meta:
        model = GenerationJob
        fields = ["id", "name", "eval_kind", "runs", "options", "status", "done", "total", "percent", "campaign",
                  "error", "created_by", "created_at", "started_at", "finished_at", "heartbeat_at"]
        read_only_fields = fields

    def get_percent(self, job) -> int:
        return generation_job.percent(job)


class GenerationJobCreateSerializer(serializers.Serializer):
    runs = serializers.ListField(child=serializers.IntegerField(), allow_empty=False)
    eval_kind = serializers.ChoiceField(choices=["", "quality", "good_common_bad", "relevance_fluency"],
                                        required=False, default="",
                                        help_text='the campaign to create over the captions; "": captions only')
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    rerank_by_fluency = serializers.BooleanField(required=False, default=False,
                                                 help_text="store the most fluent beam candidate (active fluency "
                                                           "classifier) instead of the best beam score")
    beam_size = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    split = serializers.ChoiceField(choices=["train", "val", "test"], required=False, allow_null=True, default=None)
    limit = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)


GENERATION_FILTERS = {"status": ("status", str_param), "eval_kind": ("eval_kind", str_param)}


@extend_schema_view(list=extend_schema(parameters=filter_params(GENERATION_FILTERS)))
class GenerationJobViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Captions by captioner versions on the gpu queue (optionally reranked by fluency), then with
    ``eval_kind`` a human-evaluation campaign: POST creates and queues a job, GET reads its progress."""

    permission_classes = [IsCurator]
    filters = GENERATION_FILTERS
    orderings = ("id", "created_at", "status")

    def get_queryset(self):
        return GenerationJob.objects.select_related("created_by").order_by("-pk")

    def get_serializer_class(self):
        return GenerationJobCreateSerializer if self.action == "create" else GenerationJobSerializer

    @extend_schema(request=GenerationJobCreateSerializer, responses=GenerationJobSerializer)
    def create(self, request, *args, **kwargs):
        serializer = GenerationJobCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            job = generation_job.job_create(runs=data["runs"], eval_kind=data["eval_kind"], name=data["name"],
                                            user=request.user, rerank=data["rerank_by_fluency"],
                                            beam_size=data["beam_size"], split=data["split"], limit=data["limit"])
        except generation_job.GenerationError as exc:
            raise ValidationError({"detail": str(exc), "code": exc.code, "field": exc.field}) from None
        generation_job.job_enqueue(job)
        return Response(GenerationJobSerializer(job).data, status=status.HTTP_201_CREATED)


router = DefaultRouter()
router.register("training-runs", TrainingRunViewSet, basename="api-training-run")
router.register("model-versions", ModelVersionViewSet, basename="api-model-version")
router.register("generation-jobs", GenerationJobViewSet, basename="api-generation-job")
urlpatterns = [path("", include(router.urls))]
