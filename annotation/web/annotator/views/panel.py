"""The task panel: who it is for (``Access``), what it shows (``_panel_context``) and how it is sent
(``_render``: the panel alone for htmx, the whole page otherwise), with the task it serves next (``_serve``)."""
from __future__ import annotations

from dataclasses import dataclass

from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers

from annotation import external, routing
from annotation.markdown import render_markdown
from annotation.models import Assignment, Campaign, GoldAnswer, Membership, Reservation, Task, Vote, Worker
from annotation.routing import RoutingError
from annotation.routing.panel_figures import panel_figures

PANEL = "annotation/work/_panel.html"
PAGE = "annotation/work/page.html"
PANEL_HEADER = "X-Annotate-Panel"  # annotate.js swaps 4xx answers into the panel only when present


@dataclass
class Access:
    """Who is asking for a work page, for which campaign (``access._access`` finds it)."""

    campaign: Campaign
    worker: Worker | None
    membership: Membership | None
    preview: bool = False
    external: Assignment | None = None  # a link-out / MTurk worker's assignment (no account)


def _stage_position(campaign: Campaign, worker: Worker, role: str) -> tuple[int, int]:
    """(this item's number, how many) for training and qualification items."""
    total = campaign.tasks.filter(role=role).count()
    answered = Vote.objects.filter(campaign=campaign, worker=worker, role=role).count()
    return min(answered + 1, total), total


def _progress(campaign: Campaign, worker: Worker | None) -> dict:
    if worker is None:
        return {"done": 0, "remaining": campaign.tasks.filter(role=Task.Role.REAL, status=Task.Status.OPEN).count(),
                "seconds": 0, "elapsed": "0:00", "percent": 0}
    figures = panel_figures(campaign, worker)
    seconds = figures["seconds"]
    total = figures["done"] + figures["remaining"]
    return {**figures, "seconds": int(seconds), "elapsed": _duration(seconds),
            "percent": int(100 * figures["done"] / total) if total else 100}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes}:{secs:02d}"


def panel_context(access: Access, served, *, value=None, error: RoutingError | None = None,
                   editing: Vote | None = None, feedback: dict | None = None) -> dict:
    """Everything the task panel shows. ``served`` is a routing.Served (or None after a refusal)."""
    campaign = access.campaign
    kind = campaign.kind_spec
    task = editing.task if editing is not None else (served.task if served is not None else None)
    stage = "work" if editing is not None else (served.stage if served is not None else "error")
    if feedback is not None:
        stage = "feedback"
    undo_enabled = kind.editable and not access.preview and access.worker is not None
    progress = _progress(campaign, access.worker)
    context = {
        "campaign": campaign, "kind": kind, "widget": kind.widget, "stage": stage,
        "message": served.message if served is not None else "", "task": task, "error": error,
        "editing": editing, "feedback": feedback, "preview": access.preview,
        "progress": progress,
        "undo_enabled": undo_enabled,
        "can_undo": undo_enabled and editing is None and progress.get("undoable", False),
        "edit_window": campaign.edit_window_seconds,
        "external": access.external is not None,
    }
    if access.external is not None:
        context["quota_left"] = external.quota_left(campaign, access.external)
    if task is None or feedback is not None:
        return context
    if value is None and editing is not None:
        value = editing.value
    value = value if isinstance(value, dict) else {}
    context["image_url"] = (reverse("external-image", args=[campaign.pk, task.image_id]) if access.external is not None
                            else reverse("image-file", args=[task.image_id]))
    if stage in ("training", "qualification") and access.worker is not None:
        context["position"] = _stage_position(campaign, access.worker, task.role)
    context.update(kind.widget_context(task, value, access.worker.pk if access.worker else 0))
    return context


def render_panel(request, access: Access, context: dict, status: int = 200):
    """The panel for htmx requests, the whole page otherwise."""
    if request.htmx and not request.htmx.boosted:
        response = render(request, PANEL, context, status=status)
    else:
        context["instructions_html"] = render_markdown(access.campaign.instructions)
        response = render(request, PAGE, context, status=status)
    response[PANEL_HEADER] = "1"
    patch_vary_headers(response, ("HX-Request",))
    return response


def curator_preview(access: Access):
    """A curator's look at the page: the first training item (or the first item), nothing reserved."""
    campaign = access.campaign
    task = (campaign.tasks.filter(role=Task.Role.TRAINING).select_related("image", "caption").order_by("position", "pk")
            .first() or campaign.tasks.filter(role=Task.Role.REAL).select_related("image", "caption")
            .order_by("position", "pk").first())
    message = "" if task else "This campaign has no items."
    return routing.Served(None, task, "work" if task else "done", message)


FINISH_MESSAGE = "You have done the items of this session. Press Finish to get your completion code."


def serve(access: Access):
    """The next task (routing.next_task); for an external worker whose quota is reached or who has
    no task left, the "finish" stage with the Finish button instead."""
    campaign, worker = access.campaign, access.worker
    assignment = access.external
    if assignment is not None:
        if assignment.state != Assignment.State.ACTIVE:
            return routing.Served(None, None, "finish", "You have already finished this session.")
        if external.quota_left(campaign, assignment) == 0:
            live = (Reservation.objects.filter(campaign=campaign, worker=worker, expires_at__gt=timezone.now())
                    .values_list("task_id", flat=True))
            for task_id in list(live):  # a held task goes back to the pool
                routing.release(campaign, worker, task_id)
            return routing.Served(None, None, "finish", FINISH_MESSAGE)
    served = routing.next_task(campaign, worker, access.membership)
    if assignment is not None and served.stage == "done":
        return routing.Served(None, None, "finish", "There are no more items for you. Press Finish to get your "
                                                    "completion code.")
    return served


def feedback_for(kind, vote: Vote, gold: GoldAnswer | None) -> dict | None:
    if gold is None:
        return None
    return {"correct": vote.correct, "expected": kind.display(gold.value),
            "explanation": render_markdown(gold.feedback), "tolerance": gold.tolerance,
            "is_write": kind.example_gold}
