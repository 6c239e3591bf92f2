"""Pages and API of long jobs' worker health: "worker lost" and its one-click retry (captionlab/heartbeat.py).

Curators (and admins) only: a retry re-sends work to the queues.
"""
from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from . import heartbeat
from .roles import CURATOR, IsCurator, role_required


def _job(kind: str, pk: int):
    if kind not in heartbeat.KINDS:
        raise Http404(f"No job kind {kind!r}; kinds: {', '.join(heartbeat.KINDS)}.")
    obj = heartbeat.job_object(kind, pk)
    if obj is None:
        raise Http404(f"No {kind} #{pk}.")
    return obj


def stranded(health) -> bool:
    """Queued and never started without a broker (the embedded default): a web process that
    restarted lost its in-memory queue, and nothing will ever take the job."""
    from django.conf import settings

    return health.state == "waiting" and bool(settings.CELERY_TASK_ALWAYS_EAGER)


def retry_if_lost(kind: str, obj) -> tuple[bool, str]:
    health = heartbeat.job_health(kind, obj)
    if not health.lost and not stranded(health):
        state = {"alive": "its worker is alive", "waiting": "it is waiting for a worker",
                 "": "it has finished"}[health.state]
        return False, f"Nothing to retry: {state}."
    return True, heartbeat.retry(kind, obj).capitalize() + "."


@require_POST
@role_required(CURATOR)
def job_retry(request, kind: str, pk: int):
    obj = _job(kind, pk)
    done, message = retry_if_lost(kind, obj)
    (messages.success if done else messages.info)(request, message)
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        target = obj.get_absolute_url() if hasattr(obj, "get_absolute_url") else "/"
    return HttpResponseRedirect(target)


class JobHealthSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=[])  # the registered kinds: set per instance (get_fields)
    id = serializers.IntegerField()
    state = serializers.ChoiceField(choices=["alive", "lost", "waiting", ""],
                                    help_text="alive, lost (no beat for JOB_WORKER_LOST_AFTER_S), waiting "
                                              "(queued, never started) or empty (finished)")
    seconds_since_beat = serializers.FloatField(allow_null=True)
    retried = serializers.BooleanField(required=False)
    message = serializers.CharField(required=False)

    def get_fields(self):
        fields = super().get_fields()
        kind = fields["kind"]
        assert isinstance(kind, serializers.ChoiceField)
        kind.choices = heartbeat.KINDS  # registered in the apps' ready(), maybe after this import
        return fields


class _JobView(APIView):
    permission_classes = [permissions.IsAuthenticated, IsCurator]
    serializer_class = JobHealthSerializer

    def _body(self, kind, obj, **extra):
        return {"kind": kind, "id": obj.pk, **heartbeat.job_health(kind, obj).as_dict(), **extra}


class JobHealthView(_JobView):
    """Whether the worker of a long job (import, run, release, export, aggregation) still beats."""

    @extend_schema(responses={200: JobHealthSerializer})
    def get(self, request, kind: str, pk: int):
        obj = _job(kind, pk)
        return Response(JobHealthSerializer(self._body(kind, obj)).data)


class JobRetryView(_JobView):
    """Re-send the work of a job whose worker was lost; a job that is alive, waiting or finished is left alone (409)."""

    @extend_schema(request=None, responses={200: JobHealthSerializer, 409: JobHealthSerializer})
    def post(self, request, kind: str, pk: int):
        obj = _job(kind, pk)
        done, message = retry_if_lost(kind, obj)
        body = self._body(kind, obj, retried=done, message=message)
        return Response(JobHealthSerializer(body).data, status=200 if done else 409)
