"""The annotator's hot path as JSON: fetch the next task, submit a vote.

    POST /api/campaigns/<campaign_id>/next/                   -> the next reserved task, or why none
    POST /api/campaigns/<campaign_id>/tasks/<task_id>/vote/   {"value": ..., "seconds": ...}

These two run hundreds of times a second under load (benchmarks/annotate_load.py), so they are
plain DRF function views: session (CSRF enforced) or token authentication, JSON in and out, no
serializer classes, and a fixed number of queries whatever the campaign's size (the campaign, the
worker and their membership come in one query; routing does the rest in one or two statements).
Fetching is a POST because it reserves a task. Only members of the campaign with the annotator
role (or curators and admins) may use them; anyone else gets the same 404 as for a campaign that
does not exist, so campaign ids cannot be probed. The payload never holds gold answers, and a
gold item shows as an ordinary item ("role": "real") so it cannot be told apart.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.urls import path, reverse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.decorators import (
    api_view,
    authentication_classes,
    parser_classes,
    permission_classes,
    renderer_classes,
)
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from annotation import routing
from annotation.models import Assignment, Campaign, Membership, Task, Worker
from annotation.routing import RoutingError
from annotation.tasks import schedule_aggregation
from captionlab.roles import ADMIN, ANNOTATOR, CURATOR, has_role


class HotTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, the token and its user read in one plain SQL statement on
    PostgreSQL (the ORM's query building costs more CPU than the query; same answers and errors)."""

    def authenticate_credentials(self, key):
        if connection.vendor != "postgresql":
            return super().authenticate_credentials(key)
        User = get_user_model()
        fields = list(User._meta.concrete_fields)
        sql = _sql("token", lambda: (
            f"SELECT {', '.join(f'u.{connection.ops.quote_name(f.column)}' for f in fields)} "  # noqa: S608
            f"FROM {Token._meta.db_table} t JOIN {User._meta.db_table} u ON u.{User._meta.pk.column} = t.user_id "
            f"WHERE t.key = %s"))
        with routing.hot_cursor() as cursor:
            cursor.execute(sql, [key])
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = User.from_db(connection.alias, [f.attname for f in fields], row)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return user, None


class HotTokenScheme(OpenApiAuthenticationExtension):
    """The schema of HotTokenAuthentication: the very same "Token <key>" header as DRF's."""

    target_class = "annotation.web.annotator.api.HotTokenAuthentication"
    name = "annotateTokenAuth"  # a name of its own: schema components must not share one

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": 'Token-based authentication with required prefix "Token"'}


_ERROR = inline_serializer("HotError", {"detail": serializers.CharField(), "code": serializers.CharField(required=False)})
_NEXT = inline_serializer("NextTask", {
    "stage": serializers.ChoiceField(choices=["training", "qualification", "work", "done", "failed"]),
    "task": serializers.JSONField(allow_null=True, help_text="id, role, image_url, caption, candidates, expires_at; "
                                                             "verify_rewrite: rewrite {original, rewrite, uncertain}"),
    "choices": serializers.JSONField(required=False), "kind": serializers.CharField(required=False),
    "message": serializers.CharField(required=False)})
_VOTE_IN = inline_serializer("VoteIn", {"value": serializers.JSONField(), "seconds": serializers.FloatField(required=False)})
_VOTE_OUT = inline_serializer("VoteOut", {"vote": serializers.IntegerField(), "created": serializers.BooleanField(),
                                          "feedback": serializers.JSONField(allow_null=True)})


class CanAnnotate(BasePermission):
    """Annotators, curators and admins. Loads the caller's membership of the campaign in the URL
    (with their roles, in the same statement on PostgreSQL) for the view to use."""

    message = "This endpoint needs the annotator role."

    def has_permission(self, request, view):
        request.hot_member = _load_member(request.user, view.kwargs.get("campaign_id"))
        return has_role(request.user, ANNOTATOR) or has_role(request.user, CURATOR)


def _hot(view):
    """The decorators every hot endpoint shares: POST, JSON only, signed in, allowed to annotate."""
    view = authentication_classes([SessionAuthentication, HotTokenAuthentication])(view)
    view = permission_classes([IsAuthenticated, CanAnnotate])(view)
    view = renderer_classes([JSONRenderer])(view)
    view = parser_classes([JSONParser])(view)
    return api_view(["POST"])(view)


def _error(exc: RoutingError) -> Response:
    return Response({"detail": exc.message, "code": exc.code}, status=exc.status)


_SQL: dict[str, str] = {}
# Campaign columns the hot path never reads (long text, large JSON) stay deferred.
_CAMPAIGN_SKIP = {"instructions", "selection", "stats"}


def _sql(name, build) -> str:
    text = _SQL.get(name)
    if text is None:
        text = _SQL[name] = build()
    return text


def _member_sql() -> str:
    q = connection.ops.quote_name
    cols = lambda model, alias, fields: ", ".join(f"{alias}.{q(f.column)}" for f in fields)  # noqa: E731
    role = (f"EXISTS (SELECT 1 FROM {User_groups()} ug JOIN {Group._meta.db_table} g ON g.id = ug.group_id "  # noqa: S608
            f"WHERE ug.user_id = %(user)s AND g.name = %(role_{{}})s)")
    return (f"SELECT {cols(Membership, 'm', _fields(Membership))}, {cols(Worker, 'w', _fields(Worker))}, "  # noqa: S608
            f"{cols(Campaign, 'c', _fields(Campaign))}, {cols(Assignment, 'a', _fields(Assignment))}, "
            f"{role.format(0)}, {role.format(1)}, {role.format(2)} "
            f"FROM {Membership._meta.db_table} m JOIN {Worker._meta.db_table} w ON w.id = m.worker_id "
            f"JOIN {Campaign._meta.db_table} c ON c.id = m.campaign_id "
            f"LEFT JOIN {Assignment._meta.db_table} a ON a.id = m.assignment_id "
            f"WHERE m.campaign_id = %(campaign)s AND w.user_id = %(user)s")


def User_groups() -> str:  # noqa: N802 - the through table's name
    return get_user_model().groups.through._meta.db_table


def _fields(model):
    fields = list(model._meta.concrete_fields)
    if model is Campaign:
        fields = [f for f in fields if f.name not in _CAMPAIGN_SKIP]
    return fields


def _from_row(model, row, start):
    fields = _fields(model)
    values = row[start:start + len(fields)]
    values = [f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
              for f, v in zip(fields, values)]
    return model.from_db(connection.alias, [f.attname for f in fields], values), start + len(fields)


def _load_member(user, campaign_id):
    """The user's Membership of the campaign (campaign, worker and assignment attached), or None.
    On PostgreSQL one statement, which also reads the user's roles into roles.py's cache."""
    if not user or not user.is_authenticated or campaign_id is None:
        return None
    if connection.vendor != "postgresql":
        return (Membership.objects.select_related("campaign", "worker", "assignment")
                .filter(campaign_id=campaign_id, worker__user_id=user.pk).first())
    params = {"campaign": campaign_id, "user": user.pk, "role_0": ANNOTATOR, "role_1": CURATOR, "role_2": ADMIN}
    with routing.hot_cursor() as cursor:
        cursor.execute(_sql("member", _member_sql), params)
        row = cursor.fetchone()
    if row is None:
        return None
    membership, i = _from_row(Membership, row, 0)
    membership.worker, i = _from_row(Worker, row, i)
    membership.campaign, i = _from_row(Campaign, row, i)
    assignment, i = _from_row(Assignment, row, i)
    membership.assignment = assignment if assignment.pk is not None else None
    roles = {name for name, has in zip((ANNOTATOR, CURATOR, ADMIN), row[i:i + 3]) if has}
    if user.is_superuser:
        roles.add(ADMIN)
    if user.is_active:
        user._captionlab_roles = roles
    return membership


def _member(request, campaign_id: int):
    """(campaign, worker, membership) of the signed-in user, from the one query CanAnnotate ran
    when they are a member already; otherwise routing.membership_for decides (joins an open
    campaign, or refuses)."""
    membership = getattr(request, "hot_member", None)
    if membership is None:
        membership = _load_member(request.user, campaign_id)
    if membership is not None:
        worker = membership.worker
        request.user._captionlab_worker = worker
        if membership.blocked or worker.blocked:
            raise RoutingError("You have been blocked from this campaign.", "blocked", 403)
        return membership.campaign, worker, membership
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        raise RoutingError("You are not a member of this campaign.", "not_member", 404)
    worker = routing.worker_for_user(request.user)
    return campaign, worker, routing.membership_for(campaign, worker)


def _task_payload(campaign: Campaign, served: routing.Served, worker) -> dict:
    task = served.task
    shown = campaign.kind_spec.task_payload(task, worker.pk)  # caption, candidates and the kind's own fields
    role = Task.Role.REAL if task.role == Task.Role.GOLD else task.role
    return {
        "id": task.pk,
        "role": role,
        "image_url": reverse("image-file", args=[task.image_id]),
        "caption": shown.pop("caption"),
        "candidates": shown.pop("candidates"),
        "expires_at": served.reservation.expires_at.isoformat() if served.reservation else None,
        **shown,
    }


@extend_schema(request=None, responses={200: _NEXT, 403: _ERROR, 404: _ERROR, 409: _ERROR},
               summary="Reserve the next task", tags=["annotate"])
@_hot
def campaign_next(request, campaign_id: int):
    """Reserve and return the worker's next task (the same one again while its reservation lives)."""
    try:
        campaign, worker, membership = _member(request, campaign_id)
        served = routing.next_task(campaign, worker, membership)
    except RoutingError as exc:
        return _error(exc)
    if served.task is None:
        return Response({"stage": served.stage, "task": None, "message": served.message})
    kind = campaign.kind_spec
    return Response({
        "stage": served.stage,
        "task": _task_payload(campaign, served, worker),
        "choices": [{"value": c.value, "label": c.label, "key": c.key} for c in kind.choices],
        "kind": kind.name,
    })


@extend_schema(request=_VOTE_IN, responses={201: _VOTE_OUT, 200: _VOTE_OUT, 400: _ERROR, 403: _ERROR, 404: _ERROR,
                                            409: _ERROR, 410: OpenApiResponse(_ERROR, "reservation expired")},
               summary="Vote on a reserved task", tags=["annotate"])
@_hot
def task_vote(request, campaign_id: int, task_id: int):
    """Store the worker's vote on a task reserved to them: 201 when stored, 200 on a replay."""
    data = request.data
    if not isinstance(data, dict) or "value" not in data:
        return _error(RoutingError('Send JSON {"value": ..., "seconds": ...}.', "invalid_value", 400))
    try:
        campaign, worker, membership = _member(request, campaign_id)
        if campaign.status != Campaign.Status.RUNNING:
            raise RoutingError(f"This campaign is {campaign.get_status_display().lower()}.", "not_running", 409)
        result = routing.submit_vote(campaign, worker, task_id, data["value"], seconds=data.get("seconds") or 0.0,
                                     membership=membership)
    except RoutingError as exc:
        return _error(exc)
    if result.created:
        schedule_aggregation(campaign.pk)
    return Response({"vote": result.vote.pk, "created": result.created, "feedback": result.feedback},
                    status=201 if result.created else 200)


urlpatterns = [
    path("campaigns/<int:campaign_id>/next/", campaign_next, name="api-campaign-next"),
    path("campaigns/<int:campaign_id>/tasks/<int:task_id>/vote/", task_vote, name="api-task-vote"),
]
