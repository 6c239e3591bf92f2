"""``{% job_health "run" run %}``: a "worker lost" notice with a retry button, or a "waiting for a
worker" note, on the page of a long job (captionlab/heartbeat.py). Nothing while the worker beats."""
from django import template

from captionlab import heartbeat
from captionlab.jobs import stranded as _stranded
from captionlab.roles import CURATOR, has_role

register = template.Library()


@register.inclusion_tag("jobs/_health.html", takes_context=True)
def job_health(context, kind: str, obj):
    request = context.get("request")
    health = heartbeat.job_health(kind, obj) if obj is not None else heartbeat.Health("", None)
    return {
        "kind": kind, "obj": obj, "health": health, "request": request,
        "lost_after_minutes": round(heartbeat.lost_after() / 60, 1),
        "can_retry": bool(request and has_role(request.user, CURATOR)),
        "minutes": round((health.seconds_since_beat or 0) / 60, 1),
        "stranded": _stranded(health),
    }
