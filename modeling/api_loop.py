"""JSON API of the learning loop (modeling.loop): loops (list, create, retrieve, change the settings),
"next round", and the rounds with their hold-out numbers. Curator role everywhere.

A LoopError becomes {"detail", "code", "field" (when it names one)}: 409 when a round is already open (code
"round_running"), 400 otherwise; malformed input is a 400 from the serializers, never a 500.
"""
from django.urls import include, path
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

from captionlab.roles import IsCurator
from curation.api import WhitelistFilterMixin, filter_params, int_param, str_param

from . import verdicts
from .loop import services
from .loop.services import LoopError
from .models import LearningLoop, LoopRound, Sampler
from .serializers import VerdictSerializer
from .views_loop import worker_lost

LOOP_FILTERS = {"campaign": ("campaign_id", int_param), "sampler": ("sampler", str_param)}


def _help(name: str) -> str:
    return str(LearningLoop._meta.get_field(name).help_text)


class RoundConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "A round of this loop is still queued or running."
    default_code = "round_running"


def loop_error(exc: LoopError) -> APIException:
    body = {"detail": exc.message, "code": exc.code}
    if exc.field:  # DRF would turn a None into the string "None"
        body["field"] = exc.field
    return RoundConflict(body) if exc.code == "round_running" else ValidationError(body)


class LoopRoundSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    version_number = serializers.SerializerMethodField(help_text="the trained version's number (v1, v2 ...)")
    worker_lost = serializers.SerializerMethodField(help_text="failed because its worker stopped beating")
    version_verdict = serializers.SerializerMethodField(
        help_text="the trained version's one verdict (modeling.verdicts.display), as on the models page and the CLI")

    class Meta:
        model = LoopRound
        fields = ["id", "loop", "number", "status", "stage", "trigger", "sampler", "labels_used", "label_counts",
                  "training_run", "version", "version_number", "previous_version", "activated", "decision",
                  "holdout", "changes", "error", "worker_lost", "version_verdict", "created_by", "created_at", "started_at",
                  "heartbeat_at", "finished_at"]
        read_only_fields = fields

    def get_version_number(self, round_) -> int | None:
        return round_.version.version if round_.version_id else None

    def get_worker_lost(self, round_) -> bool:
        return worker_lost(round_)

    @extend_schema_field(VerdictSerializer(allow_null=True))
    def get_version_verdict(self, round_):
        return verdicts.display(round_.version.metrics) if round_.version_id else None


class LearningLoopSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    holdout_size = serializers.SerializerMethodField(help_text="tasks in the fixed hold-out")
    rounds = serializers.SerializerMethodField(help_text="rounds so far")
    latest_round = serializers.SerializerMethodField()

    class Meta:
        model = LearningLoop
        fields = ["id", "campaign", "kind", "trainer", "config", "sampler", "random_share", "batch_size",
                  "holdout_source", "holdout_fraction", "holdout_size", "min_holdout", "auto_every_votes",
                  "votes_at_last_round", "seed", "rounds", "latest_round", "created_by", "created_at"]
        read_only_fields = fields

    def get_holdout_size(self, loop) -> int:
        return len(loop.holdout_tasks or [])

    def get_rounds(self, loop) -> int:
        return loop.rounds.count()

    @extend_schema_field(LoopRoundSerializer(allow_null=True))
    def get_latest_round(self, loop):
        latest = loop.rounds.select_related("version").order_by("-number").first()
        return LoopRoundSerializer(latest).data if latest else None


class LearningLoopCreateSerializer(serializers.Serializer):
    """Left out: the service's defaults (those of the LearningLoop model)."""

    campaign = serializers.IntegerField(help_text="a fluency campaign without a loop")
    sampler = serializers.ChoiceField(choices=Sampler.choices, required=False)
    holdout_source = serializers.ChoiceField(choices=[("random", "a random share of the real tasks"),
                                                      ("gold", "the campaign's gold items")], required=False)
    holdout_fraction = serializers.FloatField(required=False, help_text="random hold-out: 0.05 to 0.5")
    batch_size = serializers.IntegerField(required=False, help_text=_help("batch_size"))
    random_share = serializers.FloatField(required=False, help_text=_help("random_share"))
    auto_every_votes = serializers.IntegerField(required=False, help_text="start a round every N new votes; 0: manual")
    trainer = serializers.CharField(required=False, allow_blank=True,
                                    help_text="blank: the kind's default (fluency-encoder)")
    config = serializers.DictField(required=False, help_text="trainer config overrides")


class LearningLoopUpdateSerializer(serializers.Serializer):
    sampler = serializers.ChoiceField(choices=Sampler.choices, required=False)
    random_share = serializers.FloatField(required=False, help_text=_help("random_share"))
    batch_size = serializers.IntegerField(required=False, help_text=_help("batch_size"))
    auto_every_votes = serializers.IntegerField(required=False, help_text="0: manual")


@extend_schema_view(list=extend_schema(parameters=filter_params(LOOP_FILTERS)))
class LearningLoopViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, mixins.UpdateModelMixin,
                          viewsets.ReadOnlyModelViewSet):
    """Learning loops: POST creates one on a fluency campaign, PATCH changes the sampler and the automatic
    rounds, ``next-round`` queues a round on the gpu queue."""

    permission_classes = [IsCurator]
    filters = LOOP_FILTERS
    orderings = ("id", "created_at")
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        return LearningLoop.objects.select_related("created_by").order_by("-pk")

    def get_serializer_class(self):
        return {"create": LearningLoopCreateSerializer, "partial_update": LearningLoopUpdateSerializer,
                "rounds": LoopRoundSerializer}.get(self.action, LearningLoopSerializer)

    @extend_schema(request=LearningLoopCreateSerializer, responses={201: LearningLoopSerializer})
    def create(self, request, *args, **kwargs):
        from annotation.models import Campaign

        serializer = LearningLoopCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        campaign = Campaign.objects.filter(pk=data.pop("campaign")).first()
        if campaign is None:
            raise ValidationError({"detail": f"No campaign #{serializer.validated_data['campaign']}.",
                                   "code": "no_campaign", "field": "campaign"})
        data["trainer"] = data.get("trainer") or None
        try:
            loop = services.loop_create(campaign=campaign, user=request.user, **data)
        except LoopError as exc:
            raise loop_error(exc) from None
        return Response(LearningLoopSerializer(loop).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=LearningLoopUpdateSerializer, responses=LearningLoopSerializer)
    def partial_update(self, request, *args, **kwargs):
        loop = self.get_object()
        serializer = LearningLoopUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fixed = sorted(set(request.data) - set(serializer.fields))
        if fixed:  # the hold-out, trainer and campaign are fixed when the loop is made: say so, never ignore
            raise ValidationError({"detail": f"Only {', '.join(serializer.fields)} can change; not {', '.join(fixed)}.",
                                   "code": "not_editable", "field": fixed[0]})
        try:
            loop = services.loop_update(loop, **serializer.validated_data)
        except LoopError as exc:
            raise loop_error(exc) from None
        return Response(LearningLoopSerializer(loop).data)

    @extend_schema(request=None, responses={201: LoopRoundSerializer})
    @action(detail=True, methods=["post"], url_path="next-round")
    def next_round(self, request, pk=None):
        """Queue the next round; 409 {"detail", "code": "round_running"} while one is queued or running."""
        try:
            round_ = services.round_start(self.get_object(), user=request.user)
        except LoopError as exc:
            raise loop_error(exc) from None
        return Response(LoopRoundSerializer(round_).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses=LoopRoundSerializer(many=True))
    @action(detail=True, methods=["get"])
    def rounds(self, request, pk=None):
        """The loop's rounds, first to last, with their hold-out numbers."""
        loop = self.get_object()
        services.sweep_stale(loop)
        rounds = loop.rounds.select_related("version", "created_by").order_by("number")
        page = self.paginate_queryset(rounds)
        return self.get_paginated_response(LoopRoundSerializer(page, many=True).data)


class LoopRoundViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """One round: its status and stage while it runs, its numbers once done."""

    permission_classes = [IsCurator]
    serializer_class = LoopRoundSerializer

    def get_queryset(self):
        return LoopRound.objects.select_related("version", "created_by")

    def retrieve(self, request, *args, **kwargs):
        round_ = self.get_object()
        if services.sweep_stale(round_.loop):  # a lost worker shows now, not at the next beat
            round_.refresh_from_db()
        return Response(LoopRoundSerializer(round_).data)


router = SimpleRouter()  # the API root view is curation's DefaultRouter's
router.register("loops", LearningLoopViewSet, basename="api-loop")
router.register("loop-rounds", LoopRoundViewSet, basename="api-loop-round")
urlpatterns = [path("", include(router.urls))]
