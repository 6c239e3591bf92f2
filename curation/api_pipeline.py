"""API for pipelines, filter runs, decisions and curator overrides (curator role)."""
from django.db.models import Q
from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from captionlab.roles import IsCurator

from . import services
from .api import WhitelistFilterMixin, filter_params, int_param, str_param
from .errors import IngestError
from .models import Collection, FilterDecision, FilterRun, Pipeline, decisions_of_images
from .pipeline import executor, registry


class PipelineSerializer(serializers.ModelSerializer):
    class Meta:
        model = Pipeline
        fields = ["id", "name", "description", "preset", "steps", "updated_at"]
        read_only_fields = ["preset", "updated_at"]
        extra_kwargs = {"steps": {"required": True}}


class FilterRunSerializer(serializers.ModelSerializer):
    progress = serializers.SerializerMethodField()

    class Meta:
        model = FilterRun
        fields = ["id", "collection", "pipeline", "status", "snapshot", "versions", "artifacts", "funnel",
                  "items_total", "items_done", "chunks_total", "chunks_done", "chunks_failed", "error",
                  "created_at", "started_at", "finished_at", "progress"]
        read_only_fields = fields

    def get_progress(self, obj) -> dict:
        return executor.progress(obj)


class RunCreateSerializer(serializers.Serializer):
    collection = serializers.PrimaryKeyRelatedField(queryset=Collection.objects.all())
    pipeline = serializers.PrimaryKeyRelatedField(queryset=Pipeline.objects.all())


class DecisionSerializer(serializers.ModelSerializer):
    final_outcome = serializers.CharField(read_only=True)

    class Meta:
        model = FilterDecision
        fields = ["id", "run", "step", "filter_name", "image", "caption", "outcome", "override", "final_outcome",
                  "score", "reason", "details", "text_before", "text_after"]
        read_only_fields = fields


class OverrideSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=FilterDecision.Outcome.choices)
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class BulkOverrideSerializer(OverrideSerializer):
    ids = serializers.ListField(child=serializers.IntegerField(), min_length=1, max_length=5000)


class PipelineViewSet(mixins.CreateModelMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Pipelines: ordered steps ``[{"filter": name, "params": {...}}]``; ``/filters/`` lists what exists."""

    serializer_class = PipelineSerializer
    permission_classes = [IsCurator]
    queryset = Pipeline.objects.order_by("name")

    def perform_create(self, serializer):
        try:
            serializer.instance = services.pipeline_save(user=self.request.user, **serializer.validated_data)
        except IngestError as exc:
            raise ValidationError({"steps": exc.message}) from None

    def perform_update(self, serializer):
        data = {**PipelineSerializer(serializer.instance).data, **serializer.validated_data}
        try:
            serializer.instance = services.pipeline_save(
                name=data["name"], steps=data["steps"], description=data.get("description", ""),
                pipeline=serializer.instance)
        except IngestError as exc:
            raise ValidationError({"steps": exc.message}) from None

    @extend_schema(responses={200: inline_serializer("FilterInfo", many=True, fields={
        "name": serializers.CharField(), "version": serializers.IntegerField(), "label": serializers.CharField(),
        "description": serializers.CharField(), "target": serializers.CharField(),
        "transform": serializers.BooleanField(), "run_level": serializers.BooleanField(),
        "needs": serializers.ListField(child=serializers.CharField()), "defaults": serializers.DictField()})})
    @action(detail=False, methods=["get"], pagination_class=None)
    def filters(self, request):
        return Response([
            {"name": cls.name, "version": cls.version, "label": cls.label, "description": cls.description,
             "target": cls.target, "transform": cls.is_transform, "run_level": cls.run_level,
             "needs": sorted(cls.needs), "defaults": cls.defaults}
            for cls in sorted(registry.load_all().values(), key=lambda c: c.name) if not cls.name.startswith("test_")
        ])


def _of_image(image_id: int):
    """the image's own decisions and its captions' (image_id)"""
    return decisions_of_images([image_id])


RUN_FILTERS = {"collection": ("collection_id", int_param), "pipeline": ("pipeline_id", int_param), "status": ("status", str_param)}
DECISION_FILTERS = {
    "step": ("step", int_param), "filter": ("filter_name", str_param), "outcome": ("outcome", str_param), "reason": ("reason", str_param),
    "override": ("override", str_param), "image": (_of_image, int_param), "caption": ("caption_id", int_param),
    "min_score": ("score__gte", float), "max_score": ("score__lte", float),
    # Applied with the run (views_pipeline/text_search.py): a caption search, and outcomes at other steps.
    "q": (lambda value: Q(), str_param), "also": (lambda value: Q(), str_param),
}
DECISION_FILTERS["q"][0].__doc__ = ("caption search (PostgreSQL full text: words, \"a phrase\", -word) over the "
                                    "caption's text, and a transform's output")
DECISION_FILTERS["also"][0].__doc__ = "final outcomes at other steps, e.g. 5:keep,2:drop (needs step)"


@extend_schema_view(list=extend_schema(parameters=filter_params(RUN_FILTERS)))
class FilterRunViewSet(WhitelistFilterMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = FilterRunSerializer
    permission_classes = [IsCurator]
    filters = RUN_FILTERS
    orderings = ("id", "created_at")

    def get_queryset(self):
        return FilterRun.objects.order_by("-created_at")

    @extend_schema(request=RunCreateSerializer, responses={202: FilterRunSerializer})
    def create(self, request):
        form = RunCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            run = services.run_create(user=request.user, **form.validated_data)
        except IngestError as exc:
            raise ValidationError({"pipeline": exc.message}) from None
        return Response(FilterRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=DecisionSerializer(many=True), parameters=filter_params(DECISION_FILTERS))
    @action(detail=True, methods=["get"])
    def decisions(self, request, pk=None):
        run = self.get_object()
        view = _DecisionFilter(request)
        decisions = _searched(run, request.query_params, view.filter_queryset(run.decisions.order_by("step", "pk")))
        page = self.paginate_queryset(decisions)
        return self.get_paginated_response(DecisionSerializer(page, many=True).data)

    @extend_schema(request=BulkOverrideSerializer, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="overrides")
    def bulk_override(self, request, pk=None):
        run = self.get_object()
        form = BulkOverrideSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        decisions = list(run.decisions.filter(pk__in=form.validated_data["ids"]))
        if len(decisions) != len(set(form.validated_data["ids"])):
            raise ValidationError({"ids": "some ids are not decisions of this run"})
        count = services.decisions_override(decisions=decisions, outcome=form.validated_data["outcome"],
                                            note=form.validated_data.get("note", ""), user=request.user)
        return Response({"overridden": count})

    def filter_queryset(self, queryset):
        if self.action in ("decisions", "bulk_override"):
            return queryset
        return super().filter_queryset(queryset)


def _searched(run, params, decisions):
    """``q`` (caption search) and ``also`` ("5:keep,2:drop": final outcomes at other steps, with ``step``)."""
    from .views_pipeline.text_search import MAX_QUERY_CHARS, decisions_also, decisions_matching, parse_also

    if params.get("also"):
        if "step" not in params:
            raise ValidationError({"also": "give the step whose decisions to list (step=...) with also"})
        also, errors = parse_also(params["also"])
        step = int(params["step"])
        errors += [f"this run has no step {other + 1}" for other, _ in also if other >= len(run.snapshot)]
        if errors or not 0 <= step < len(run.snapshot):
            raise ValidationError({"also": errors or [f"this run has no step {step}"]})
        decisions = decisions_also(decisions, run, step, also)
    q = " ".join((params.get("q") or "").split())
    if len(q) > MAX_QUERY_CHARS:
        raise ValidationError({"q": f"at most {MAX_QUERY_CHARS} characters"})
    return decisions_matching(decisions, run, q) if q else decisions


class _DecisionFilter(WhitelistFilterMixin):
    filters = DECISION_FILTERS
    orderings = ("id", "score", "step")

    def __init__(self, request):
        self.request = request


class DecisionViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = DecisionSerializer
    permission_classes = [IsCurator]
    queryset = FilterDecision.objects.all()

    @extend_schema(request=OverrideSerializer, responses=DecisionSerializer)
    @action(detail=True, methods=["post"])
    def override(self, request, pk=None):
        decision = self.get_object()
        form = OverrideSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        decision = services.decision_override(decision=decision, user=request.user, **form.validated_data)
        return Response(DecisionSerializer(decision).data)
