"""The task panel: what it shows (``_panel_context``) and how it is sent (``_render``: the panel
alone for htmx, the whole page otherwise), with the task it serves next (``_serve``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers

from .. import external, routing
from ..kinds import CandidatesKind, SliderKind, VerifyRewriteKind
from ..markdown import render_markdown
from ..models import Assignment, Campaign, Caption, GoldAnswer, Reservation, Task, Vote, Worker
from ..routing import RoutingError
from ..routing.panel_figures import panel_figures

if TYPE_CHECKING:
    from .access import Access

PANEL = "annotation/work/_panel.html"
PAGE = "annotation/work/page.html"
PANEL_HEADER = "X-Annotate-Panel"  # annotate.js swaps 4xx answers into the panel only when present


def _widget(kind) -> str:
    if kind.target == "image":
        return "write"
    if isinstance(kind, CandidatesKind):
        return "candidates"
    if isinstance(kind, SliderKind):
        return "slider"
    if isinstance(kind, VerifyRewriteKind):
        return "verify"
    return "choices"


def _options(kind):
    """(value, label, key) of each answer a dimension takes."""
    if kind.choices:
        return [(c.value, c.label, c.key) for c in kind.choices]
    values = getattr(kind, "scale_values", ())
    return [(v, str(v), str(v)) for v in values]


DIMENSION_LABELS = {"label": "Rating", "relevance": "Relevance", "fluency": "Fluency"}


def _candidate_rows(kind, task: Task, worker_id: int, value: dict | None) -> list[dict]:
    order = kind.candidate_order(task, worker_id)
    captions = Caption.objects.in_bulk(order)
    ratings = (value or {}).get("ratings") or {}
    rows = []
    for number, cid in enumerate((c for c in order if c in captions), start=1):
        given = ratings.get(str(cid)) or {}
        dims = []
        for dim in kind.dimensions:
            picked = given.get(dim)
            dims.append({
                "name": dim, "label": DIMENSION_LABELS.get(dim, dim.replace("_", " ").capitalize()),
                "field": f"r-{cid}-{dim}",
                "options": [{"value": v, "label": label, "key": key, "checked": picked is not None and str(picked) == str(v)}
                            for v, label, key in _options(kind)],
            })
        rows.append({"caption": captions[cid], "number": number, "dims": dims})
    return rows


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


def _panel_context(access: Access, served, *, value=None, error: RoutingError | None = None,
                   editing: Vote | None = None, feedback: dict | None = None) -> dict:
    """Everything the task panel shows. ``served`` is a routing.Served (or None after a refusal)."""
    campaign = access.campaign
    kind = campaign.kind_spec
    task = editing.task if editing is not None else (served.task if served is not None else None)
    stage = "work" if editing is not None else (served.stage if served is not None else "error")
    if feedback is not None:
        stage = "feedback"
    undo_enabled = kind.target != "image" and not access.preview and access.worker is not None
    progress = _progress(campaign, access.worker)
    context = {
        "campaign": campaign, "kind": kind, "widget": _widget(kind), "stage": stage,
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
    widget = context["widget"]
    if widget in ("choices", "verify"):
        picked = value.get("label")
        context["options"] = [{"value": v, "label": label, "key": key, "checked": picked == v}
                              for v, label, key in _options(kind)]
    if widget == "verify":
        from ..verify_rewrites import rewrite_of

        context["rewrite"] = rewrite_of(task)
        context["text"] = value.get("text") or ""
    elif widget == "slider":
        score = value.get("score")
        context["slider"] = {"min": kind.minimum, "max": kind.maximum,
                             "value": score if isinstance(score, (int, float)) else (kind.minimum + kind.maximum) // 2}
    elif widget == "candidates":
        context["rows"] = _candidate_rows(kind, task, access.worker.pk if access.worker else 0, value)
    else:
        context["text"] = value.get("text", "")
    return context


def _render(request, access: Access, context: dict, status: int = 200):
    """The panel for htmx requests, the whole page otherwise."""
    if request.htmx and not request.htmx.boosted:
        response = render(request, PANEL, context, status=status)
    else:
        context["instructions_html"] = render_markdown(access.campaign.instructions)
        response = render(request, PAGE, context, status=status)
    response[PANEL_HEADER] = "1"
    patch_vary_headers(response, ("HX-Request",))
    return response


def _preview(access: Access):
    """A curator's look at the page: the first training item (or the first item), nothing reserved."""
    campaign = access.campaign
    task = (campaign.tasks.filter(role=Task.Role.TRAINING).select_related("image", "caption").order_by("position", "pk")
            .first() or campaign.tasks.filter(role=Task.Role.REAL).select_related("image", "caption")
            .order_by("position", "pk").first())
    message = "" if task else "This campaign has no items."
    return routing.Served(None, task, "work" if task else "done", message)


FINISH_MESSAGE = "You have done the items of this session. Press Finish to get your completion code."


def _serve(access: Access):
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


def _describe(kind, value, task: Task) -> list[str]:
    """A training example's expected answer in words (escaped by the template)."""
    value = value if isinstance(value, dict) else {}
    widget = _widget(kind)
    if widget in ("choices", "verify"):
        labels = {c.value: c.label for c in kind.choices}
        said = [labels.get(value.get("label"), str(value.get("label")))]
        return said + ([f"“{value['text']}”"] if widget == "verify" and value.get("text") else [])
    if widget == "slider":
        return [f"{value.get('score')}"]
    if widget == "write":
        return [value.get("text", "")]
    captions = Caption.objects.in_bulk([int(c) for c in (value.get("ratings") or {}) if str(c).isdigit()])
    labels = dict((v, label) for v, label, _ in _options(kind))
    lines = []
    for cid, dims in (value.get("ratings") or {}).items():
        caption = captions.get(int(cid)) if str(cid).isdigit() else None
        rated = ", ".join(f"{DIMENSION_LABELS.get(d, d)} {labels.get(v, v)}" for d, v in dims.items())
        lines.append(f"“{caption.text if caption else cid}”: {rated}")
    return lines


def _feedback_for(kind, vote: Vote, gold: GoldAnswer | None) -> dict | None:
    if gold is None:
        return None
    return {"correct": vote.correct, "expected": _describe(kind, gold.value, vote.task),
            "explanation": render_markdown(gold.feedback), "tolerance": gold.tolerance,
            "is_write": kind.target == "image"}
