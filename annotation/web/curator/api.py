"""JSON API of crowd campaigns (the hot path, fetch next task and submit a vote, is the annotator's, in
``annotation.web.annotator.api``).

Who sees what, enforced here and nowhere left to the client:
- curators (and admins) manage campaigns and see everything about them: tasks, every vote, gold
  answers, aggregates, agreement, workers;
- an annotator sees only the campaigns they are a member of (and running campaigns open to all),
  through a reduced serializer, their own progress and their own votes, never a gold answer,
  never whether an item is gold, never another worker's vote; curator endpoints answer 403 with
  the role they need, and a campaign they cannot see answers 404;
- users without a role get 403, anonymous callers 403 (session) or 401.

Query filters are whitelisted per endpoint (``curation.api.WhitelistFilterMixin``): an unknown
parameter is a 400, never an ORM lookup.
"""
from __future__ import annotations

from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from annotation import quality, routing, services
from annotation import tasks as annotation_tasks
from annotation.models import Aggregate, Campaign, GoldAnswer, Membership, Task, Vote, Worker
from annotation.providers import controls
from annotation.serializers import (
    AggregateQueuedSerializer,
    AggregateSerializer,
    AgreementSerializer,
    BlockResultSerializer,
    BlockSerializer,
    CampaignAnnotatorSerializer,
    CampaignCreateSerializer,
    CampaignPatchSerializer,
    CampaignSerializer,
    CampaignUpdateSerializer,
    GoldCreateSerializer,
    GoldSerializer,
    MembersResultSerializer,
    MembersSerializer,
    OwnVoteSerializer,
    ProgressSerializer,
    StatusSerializer,
    TaskSerializer,
    VoteEditRequestSerializer,
    VoteSerializer,
    WorkerSerializer,
)
from captionlab.roles import ANNOTATOR, CURATOR, IsCurator, has_role
from curation.api import WhitelistFilterMixin, filter_params, int_param, str_param

NOT_VISIBLE = "No such campaign, or you are not a member of it."


def _bool(value):
    lowered = str(value).lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise ValueError("must be true or false")


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The campaign's state does not allow this."
    default_code = "conflict"


class QueueUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The task queue is not reachable; try again later."
    default_code = "queue_unavailable"


class RoutingAPIError(APIException):
    """A ``routing.RoutingError`` with the status it carries: {"detail": message, "code": code}."""

    def __init__(self, exc: routing.RoutingError):
        self.status_code = exc.status
        super().__init__({"detail": exc.message, "code": exc.code})


def campaign_error(exc: services.CampaignError) -> ValidationError:
    return ValidationError({exc.field or "non_field_errors": [exc.message]})


class IsCampaignUser(BasePermission):
    """Annotators, curators and admins; the queryset then narrows what an annotator sees."""

    message = "The campaign API needs the annotator or curator role."

    def has_permission(self, request, view):
        return has_role(request.user, ANNOTATOR) or has_role(request.user, CURATOR)


class _Filter(WhitelistFilterMixin):
    """Whitelisted filters for a nested list (votes, tasks...) of a campaign."""

    def __init__(self, request, filters, orderings=("id",)):
        self.request, self.filters, self.orderings = request, filters, orderings


CAMPAIGN_FILTERS = {"status": ("status", str_param), "kind": ("kind", str_param), "collection": ("collection_id", int_param),
                    "name": ("name__icontains", str_param)}
TASK_FILTERS = {"role": ("role", str_param), "status": ("status", str_param), "image": ("image_id", int_param),
                "caption": ("caption_id", int_param)}
VOTE_FILTERS = {"worker": ("worker_id", int_param), "task": ("task_id", int_param), "role": ("role", str_param),
                "caption": ("caption_id", int_param)}
OWN_VOTE_FILTERS = {"task": ("task_id", int_param)}
AGGREGATE_FILTERS = {"method": ("method", str_param), "part": ("part", str_param), "task": ("task_id", int_param)}
GOLD_FILTERS = {"role": ("task__role", str_param), "task": ("task_id", int_param)}
WORKER_FILTERS = {"blocked": ("blocked", _bool)}

# Actions an annotator may call (on campaigns they can see); every other one needs a curator.
ANNOTATOR_ACTIONS = {"list", "retrieve", "progress", "votes", "vote", None}
# Fields a PATCH may change; everything else about a campaign is fixed at creation.
UPDATABLE = set(CampaignPatchSerializer.Meta.fields)

VOTE_ID = OpenApiParameter("vote_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="a vote of the campaign")
WORKER_ID = OpenApiParameter("worker_id", OpenApiTypes.INT, OpenApiParameter.PATH,
                             description="a worker who is a member of the campaign")


@extend_schema_view(
    list=extend_schema(parameters=filter_params(CAMPAIGN_FILTERS),
                       description="Curators see every campaign; an annotator sees the campaigns they are a member "
                                   "of and running campaigns open to all, without the selection and the stats."),
    retrieve=extend_schema(description="Annotators get a reduced view (no selection, no stats)."),
)
class CampaignViewSet(WhitelistFilterMixin, mixins.CreateModelMixin, mixins.UpdateModelMixin,
                      viewsets.ReadOnlyModelViewSet):
    """Campaigns: create from a selection, change settings while draft or paused, change status, and
    read tasks, votes, aggregates, agreement, gold answers and workers."""

    serializer_class = CampaignSerializer
    filters = CAMPAIGN_FILTERS
    orderings = ("id", "name", "created_at", "status")
    http_method_names = ["get", "post", "patch", "head", "options"]

    # --- who may do what --------------------------------------------------------------------

    def get_permissions(self):
        if self.action in ANNOTATOR_ACTIONS:
            return [IsCampaignUser()]
        return [IsCurator()]

    @property
    def is_curator(self) -> bool:
        return has_role(self.request.user, CURATOR)

    def get_queryset(self):
        qs = Campaign.objects.all()
        if getattr(self, "swagger_fake_view", False):
            return qs.none()
        if not self.is_curator:
            mine = Membership.objects.filter(worker__user=self.request.user).values("campaign_id")
            qs = qs.filter(Q(pk__in=mine, status__in=[Campaign.Status.RUNNING, Campaign.Status.PAUSED,
                                                       Campaign.Status.FINISHED])
                           | Q(open_to_all=True, status=Campaign.Status.RUNNING))
            return qs.order_by("-created_at")
        tasks = (Task.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL).order_by()
                 .values("campaign").annotate(n=Count("pk")).values("n"))
        members = (Membership.objects.filter(campaign=OuterRef("pk")).order_by()
                   .values("campaign").annotate(n=Count("pk")).values("n"))
        return (qs.select_related("created_by")
                .annotate(task_count=Coalesce(Subquery(tasks, output_field=IntegerField()), Value(0)),
                          member_count=Coalesce(Subquery(members, output_field=IntegerField()), Value(0)))
                .order_by("-created_at"))

    def get_serializer_class(self):
        if getattr(self, "swagger_fake_view", False) or self.is_curator:
            return CampaignSerializer
        return CampaignAnnotatorSerializer

    def get_object(self):
        try:
            return super().get_object()
        except Http404:
            raise NotFound(NOT_VISIBLE) from None

    def filter_queryset(self, queryset):
        if self.action != "list":  # nested lists filter their own rows, with their own whitelist
            return queryset
        return super().filter_queryset(queryset)

    def _nested(self, queryset, filters, orderings=("id",)):
        page = self.paginate_queryset(_Filter(self.request, filters, orderings).filter_queryset(queryset))
        return page

    # --- create and update ------------------------------------------------------------------

    @extend_schema(request=CampaignCreateSerializer, responses={201: CampaignSerializer})
    def create(self, request, *args, **kwargs):
        form = CampaignCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        selection = {k: data.pop(k) for k in CampaignCreateSerializer.SELECTION if k in data}
        crowd = {k: data.pop(k) for k in controls.CONTROL_FIELDS if k in data}
        try:
            campaign = controls.create_campaign(controls=crowd, name=data.pop("name"), kind=data.pop("kind"),
                                                selection=selection, user=request.user,
                                                members=data.pop("members", []), status=data.pop("status"), **data)
        except services.CampaignError as exc:
            raise campaign_error(exc) from None
        campaign = self.get_queryset().get(pk=campaign.pk)
        return Response(CampaignSerializer(campaign, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=CampaignPatchSerializer, responses=CampaignSerializer)
    def partial_update(self, request, *args, **kwargs):
        campaign = self.get_object()
        if campaign.status not in (Campaign.Status.DRAFT, Campaign.Status.PAUSED):
            raise Conflict(f"A {campaign.status} campaign's settings cannot change; pause it first.")
        fixed = sorted(set(request.data) - UPDATABLE)
        if fixed:
            raise ValidationError({name: ["This field cannot be changed here (fixed at creation, or changed "
                                          "through its own endpoint)."] for name in fixed})
        patch = CampaignPatchSerializer(campaign, data=request.data, partial=True)
        patch.is_valid(raise_exception=True)  # types and ranges of every field, the crowd controls included
        crowd = {k: patch.validated_data[k] for k in controls.CONTROL_FIELDS if k in patch.validated_data}
        form = CampaignUpdateSerializer(campaign, data={k: v for k, v in request.data.items()
                                                        if k not in controls.CONTROL_FIELDS}, partial=True)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            services.check_settings({k: v for k, v in data.items() if v is not None})
        except services.CampaignError as exc:
            raise campaign_error(exc) from None
        lo = data.get("text_min_chars", campaign.text_min_chars)
        hi = data.get("text_max_chars", campaign.text_max_chars)
        if lo > hi:
            raise ValidationError({"text_max_chars": ["The length limit is below the minimum length."]})
        with transaction.atomic():
            if "votes_per_item" in data:
                self._change_votes_per_item(campaign, data["votes_per_item"])
            form.save()
            if crowd:
                try:
                    controls.update_controls(campaign, crowd)
                except services.CampaignError as exc:
                    raise campaign_error(exc) from None
        campaign = self.get_queryset().get(pk=campaign.pk)
        return Response(CampaignSerializer(campaign, context=self.get_serializer_context()).data)

    def update(self, request, *args, **kwargs):  # PUT is not offered (http_method_names)
        return self.partial_update(request, *args, **kwargs)

    @staticmethod
    def _change_votes_per_item(campaign: Campaign, new: int) -> None:
        """Existing real tasks follow the new requirement. Once votes exist it may only rise: a lower
        requirement would strand reservations taken under the old one."""
        old = campaign.votes_per_item
        if new == old:
            return
        real = Task.objects.filter(campaign=campaign, role=Task.Role.REAL)
        if campaign.status == Campaign.Status.DRAFT and not Vote.objects.filter(campaign=campaign).exists():
            real.update(votes_required=new)
            return
        if new < old:
            raise ValidationError({"votes_per_item": ["Votes per item can only be raised once a campaign has run."]})
        real.filter(votes_required__lt=new).update(votes_required=new, status=Task.Status.OPEN, done_at=None)

    @extend_schema(request=StatusSerializer, responses=CampaignSerializer)
    @action(detail=True, methods=["post"], url_path="status")
    def set_status(self, request, pk=None):
        """Start, pause, finish or restart the campaign (draft → running ⇄ paused → finished)."""
        campaign = self.get_object()
        form = StatusSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            services.set_status(campaign, form.validated_data["status"])
        except services.CampaignError as exc:
            raise campaign_error(exc) from None
        campaign = self.get_queryset().get(pk=campaign.pk)
        return Response(CampaignSerializer(campaign, context=self.get_serializer_context()).data)

    @extend_schema(request=MembersSerializer, responses=MembersResultSerializer)
    @action(detail=True, methods=["post"])
    def members(self, request, pk=None):
        """Add annotators to the campaign by username."""
        campaign = self.get_object()
        form = MembersSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        added = services.members_set(campaign, form.validated_data["usernames"])
        names = sorted(str(m.worker) for m in campaign.memberships.select_related("worker__user"))
        return Response({"added": added, "members": names})

    # --- progress, tasks, votes ---------------------------------------------------------------

    @extend_schema(responses=ProgressSerializer)
    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None):
        """Curators: the campaign's counts. Annotators: their own done and remaining."""
        campaign = self.get_object()
        if self.is_curator:
            return Response(services.progress(campaign))
        return Response(services.worker_progress(campaign, routing.worker_for_user(request.user)))

    @extend_schema(responses=TaskSerializer(many=True), parameters=filter_params(TASK_FILTERS))
    @action(detail=True, methods=["get"])
    def tasks(self, request, pk=None):
        """Every task with its counters, role, gold answer and consensus labels (curators only;
        annotators get tasks one at a time through ``next``)."""
        campaign = self.get_object()
        qs = (Task.objects.filter(campaign=campaign).select_related("caption", "gold")
              .prefetch_related("aggregates").order_by("position", "pk"))
        page = self._nested(qs, TASK_FILTERS, ("id", "position", "priority", "votes_count", "done_at"))
        return self.get_paginated_response(TaskSerializer(page, many=True).data)

    @extend_schema(responses=VoteSerializer(many=True), parameters=filter_params(VOTE_FILTERS),
                   description="Curators: every vote (filter by worker, task, role). Annotators: only their own "
                               "votes (filter by task), without role or correctness.")
    @action(detail=True, methods=["get"])
    def votes(self, request, pk=None):
        campaign = self.get_object()
        qs = Vote.objects.filter(campaign=campaign).prefetch_related("edits").order_by("pk")
        if self.is_curator:
            page = self._nested(qs.select_related("worker__user"), VOTE_FILTERS, ("id", "created_at", "seconds"))
            return self.get_paginated_response(VoteSerializer(page, many=True).data)
        worker = routing.worker_for_user(request.user)
        page = self._nested(qs.filter(worker=worker).select_related("campaign"), OWN_VOTE_FILTERS,
                            ("id", "created_at"))
        return self.get_paginated_response(OwnVoteSerializer(page, many=True).data)

    @extend_schema(methods=["GET"], parameters=[VOTE_ID], responses=VoteSerializer)
    @extend_schema(methods=["PATCH"], parameters=[VOTE_ID], request=VoteEditRequestSerializer,
                   responses=OwnVoteSerializer,
                   description="Change your own vote within the campaign's edit window; the old value stays "
                               "in the vote's audit trail (``edits``).")
    @action(detail=True, methods=["get", "patch"], url_path=r"votes/(?P<vote_id>[0-9]+)", url_name="vote")
    def vote(self, request, pk=None, vote_id=None):
        campaign = self.get_object()
        qs = Vote.objects.filter(campaign=campaign).select_related("campaign", "worker__user").prefetch_related(
            "edits")
        worker = routing.worker_for_user(request.user)
        if request.method == "GET":
            if not self.is_curator:
                qs = qs.filter(worker=worker)
            vote = qs.filter(pk=vote_id).first()
            if vote is None:
                raise NotFound("No such vote in this campaign." if self.is_curator else "No such vote of yours.")
            serializer = VoteSerializer if self.is_curator else OwnVoteSerializer
            return Response(serializer(vote).data)
        form = VoteEditRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            routing.membership_for(campaign, worker, join=False)
            routing.edit_vote(campaign, worker, int(vote_id), form.validated_data["value"])
        except routing.RoutingError as exc:
            raise RoutingAPIError(exc) from None
        annotation_tasks.schedule_aggregation(campaign.pk)
        return Response(OwnVoteSerializer(qs.get(pk=vote_id)).data)

    # --- aggregation and agreement ------------------------------------------------------------

    @extend_schema(responses=AggregateSerializer(many=True), parameters=filter_params(AGGREGATE_FILTERS))
    @action(detail=True, methods=["get"])
    def aggregates(self, request, pk=None):
        """Consensus labels per task and part, per aggregation method."""
        campaign = self.get_object()
        qs = Aggregate.objects.filter(task__campaign=campaign).order_by("task_id", "part", "method")
        page = self._nested(qs, AGGREGATE_FILTERS, ("id", "confidence", "task"))
        return self.get_paginated_response(AggregateSerializer(page, many=True).data)

    @extend_schema(responses=AgreementSerializer)
    @action(detail=True, methods=["get"])
    def agreement(self, request, pk=None):
        """Krippendorff's alpha (overall and per part) and the per-worker figures of the latest aggregation."""
        stats = self.get_object().stats or {}
        return Response({"computed_at": stats.get("computed_at"), "n_votes": stats.get("n_votes"),
                         "agreement": stats.get("agreement") or {}, "workers": stats.get("workers") or [],
                         "label_distribution": stats.get("label_distribution") or {},
                         "seed_figures": stats.get("seed_figures") or {}})

    @extend_schema(request=None, responses={202: AggregateQueuedSerializer})
    @action(detail=True, methods=["post"])
    def aggregate(self, request, pk=None):
        """Queue a recomputation of the campaign's aggregates and agreement now (workers the campaign's
        gold rule fails are blocked first)."""
        from kombu.exceptions import OperationalError

        campaign = self.get_object()
        quality.enforce_gold_rules(campaign)  # the gold rule of every provider, before the figures
        try:
            result = annotation_tasks.aggregate_campaign.delay(campaign.pk)
        except (OperationalError, ConnectionError, OSError):
            raise QueueUnavailable("The task queue is not reachable; try again, or run "
                                   f"`manage.py campaign aggregate {campaign.pk}`.") from None
        return Response({"queued": True, "task_id": getattr(result, "id", None)}, status=status.HTTP_202_ACCEPTED)

    # --- gold answers ------------------------------------------------------------------------

    @extend_schema(methods=["GET"], responses=GoldSerializer(many=True), parameters=filter_params(GOLD_FILTERS))
    @extend_schema(methods=["POST"], request=GoldCreateSerializer, responses={201: GoldSerializer})
    @action(detail=True, methods=["get", "post"])
    def gold(self, request, pk=None):
        """Gold, training and qualification answers (curators only; never shown to annotators)."""
        campaign = self.get_object()
        if request.method == "GET":
            qs = GoldAnswer.objects.filter(task__campaign=campaign).select_related("task").order_by("task_id")
            page = self._nested(qs, GOLD_FILTERS)
            return self.get_paginated_response(GoldSerializer(page, many=True).data)
        form = GoldCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        task = Task.objects.filter(pk=data["task"], campaign=campaign).select_related("campaign").first()
        if task is None:
            raise ValidationError({"task": ["No such task in this campaign."]})
        try:
            gold = services.set_gold(task, role=data["role"], value=data["value"], feedback=data["feedback"],
                                     tolerance=data["tolerance"])
        except services.CampaignError as exc:
            raise campaign_error(exc) from None
        gold = GoldAnswer.objects.select_related("task").get(pk=gold.pk)
        return Response(GoldSerializer(gold).data, status=status.HTTP_201_CREATED)

    # --- workers -----------------------------------------------------------------------------

    @extend_schema(responses=WorkerSerializer(many=True), parameters=filter_params(WORKER_FILTERS))
    @action(detail=True, methods=["get"])
    def workers(self, request, pk=None):
        """Members with votes, time, gold accuracy, reliability and agreement with the consensus."""
        campaign = self.get_object()
        qs = Membership.objects.filter(campaign=campaign).select_related("worker__user").order_by("worker_id")
        page = self._nested(qs, WORKER_FILTERS, ("id", "votes", "gold_correct", "reliability"))
        stats = {w.get("worker"): w for w in (campaign.stats or {}).get("workers") or [] if isinstance(w, dict)}
        data = WorkerSerializer(page, many=True, context={"worker_stats": stats}).data
        return self.get_paginated_response(data)

    @extend_schema(request=BlockSerializer, responses=BlockResultSerializer, parameters=[WORKER_ID])
    @action(detail=True, methods=["post"], url_path=r"workers/(?P<worker_id>[0-9]+)/block", url_name="worker-block")
    def block(self, request, pk=None, worker_id=None):
        """Block (or unblock with ``"blocked": false``) a worker: their votes leave the counts and the
        aggregation, and the tasks they reserved or voted on go back to the pool."""
        campaign = self.get_object()
        form = BlockSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        membership = Membership.objects.filter(campaign=campaign, worker_id=worker_id).first()
        if membership is None:
            raise NotFound("That worker is not a member of this campaign.")
        worker = Worker.objects.get(pk=worker_id)
        blocked, reason = form.validated_data["blocked"], form.validated_data["reason"]
        reopened = routing.block_worker(campaign, worker, reason=reason, blocked=blocked)
        annotation_tasks.schedule_aggregation(campaign.pk)
        return Response({"worker": worker.pk, "blocked": blocked, "reason": reason, "tasks_reopened": reopened})
