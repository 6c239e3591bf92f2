"""The work page's POSTs: submit a vote (or the change of an undone one), undo, skip. Each
answers with the next panel under htmx, or redirects to the work page without it."""
from __future__ import annotations

import logging

from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from annotation import routing
from annotation.kinds import VoteInvalid
from annotation.markdown import render_markdown
from annotation.models import Reservation, Task, Worker
from annotation.routing import RoutingError

from .access import Access, work_view
from .panel import panel_context, render_panel, serve

log = logging.getLogger(__name__)


def _seconds(post, worker: Worker, task_id: int) -> float:
    """The time taken as the page measured it; without JavaScript, the time since the reservation."""
    try:
        seconds = float(post.get("seconds", ""))
        if seconds == seconds and seconds >= 0:
            return seconds
    except ValueError:
        pass
    created = (Reservation.objects.filter(task_id=task_id, worker=worker)
               .values_list("created_at", flat=True).first())
    return (timezone.now() - created).total_seconds() if created else 0.0


def _schedule(campaign_id: int) -> None:
    """Recompute the campaign's aggregates soon. The vote is stored already: a broker that is down
    must not turn the annotator's answer into an error page."""
    from annotation.tasks import schedule_aggregation

    try:
        schedule_aggregation(campaign_id)
    except Exception:
        log.exception("could not schedule the aggregation of campaign %s", campaign_id)


def _int(value) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _preview_refused():
    return RoutingError("This is a preview: a curator's answers are not recorded. Join the campaign as an "
                        "annotator to vote.", "preview", 403)


@work_view
@require_POST
def work_submit(request, access: Access):
    """Store a vote (or the changed value of a vote re-opened by undo), then show what comes next."""
    if access.preview:
        raise _preview_refused()
    campaign, worker = access.campaign, access.worker
    kind = campaign.kind_spec
    task_id, vote_id = _int(request.POST.get("task")), _int(request.POST.get("vote"))
    if task_id is None:
        raise RoutingError("The form did not say which task it answers; reload the page.", "no_task", 400)
    candidates = None
    if kind.target == "candidates":
        candidates = Task.objects.filter(pk=task_id, campaign=campaign).values_list("candidates", flat=True).first()
    try:
        try:
            value = kind.value_from_post(request.POST, candidates)
        except VoteInvalid as exc:
            raise RoutingError(str(exc), "invalid_value", 400) from None
        if vote_id is not None:
            routing.edit_vote(campaign, worker, vote_id, value)
            _schedule(campaign.pk)
            return _after_vote(request, access, None)
        seconds = _seconds(request.POST, worker, task_id)
        result = routing.submit_vote(campaign, worker, task_id, value, seconds=seconds, membership=access.membership)
    except RoutingError as error:
        return _refusal(request, access, error, task_id, vote_id,
                        kind.posted_value(request.POST, candidates))
    if result.created:
        _schedule(campaign.pk)
    return _after_vote(request, access, result)


def _after_vote(request, access: Access, result):
    campaign = access.campaign
    if result is not None and result.feedback is not None:
        if not (request.htmx and not request.htmx.boosted):
            return redirect(f"{reverse('annotate', args=[campaign.pk])}?feedback={result.vote.pk}")
        feedback = {"correct": result.feedback["correct"],
                    "expected": campaign.kind_spec.display(result.feedback["expected"]),
                    "explanation": render_markdown(result.feedback.get("feedback", "")),
                    "is_write": campaign.kind_spec.example_gold}
        return render_panel(request, access, panel_context(access, None, feedback=feedback))
    if not (request.htmx and not request.htmx.boosted):
        return redirect("annotate", campaign.pk)
    served = serve(access)
    return render_panel(request, access, panel_context(access, served))


def _refusal(request, access: Access, error: RoutingError, task_id: int, vote_id: int | None, value: dict):
    """The refused answer's own task again with the message and what was typed, when the annotator
    still holds it (or is still editing it); otherwise the message and their next task."""
    campaign, worker = access.campaign, access.worker
    if vote_id is not None:
        vote = routing.last_editable_vote(campaign, worker)
        if vote is not None and vote.pk == vote_id:
            return render_panel(request, access, panel_context(access, None, editing=vote, value=value, error=error),
                           status=error.status)
    try:
        served = serve(access)
    except RoutingError:  # e.g. paused meanwhile: the refusal's own message is the one to read
        served = None
    same = served is not None and served.task is not None and served.task.pk == task_id
    context = panel_context(access, served, value=value if same else None, error=error)
    if not same:  # e.g. a late answer the item no longer needs: what was typed stays on the page
        context["unsaved"] = campaign.kind_spec.unsaved(value)
    return render_panel(request, access, context, status=error.status)


@work_view
@require_POST
def work_undo(request, access: Access):
    """Re-open the last vote that is still within the edit window, to change it."""
    if access.preview:
        raise _preview_refused()
    campaign, worker = access.campaign, access.worker
    if not campaign.kind_spec.editable:
        error = RoutingError("A written caption cannot be changed; write a new one on the next image.",
                             "not_editable", 409)
        return _refusal(request, access, error, 0, None, {})
    vote = routing.last_editable_vote(campaign, worker)
    if vote is None:
        error = RoutingError(f"There is no vote to undo: votes can be changed for {campaign.edit_window_seconds} "
                             "seconds after they are given.", "edit_closed", 409)
        return _refusal(request, access, error, 0, None, {})
    if not (request.htmx and not request.htmx.boosted):
        return redirect(f"{reverse('annotate', args=[campaign.pk])}?edit={vote.pk}")
    return render_panel(request, access, panel_context(access, None, editing=vote))


@work_view
@require_POST
def work_skip(request, access: Access):
    """Give the held task back to the pool and take another one."""
    if access.preview:
        raise _preview_refused()
    campaign, worker = access.campaign, access.worker
    task_id = _int(request.POST.get("task"))
    task = Task.objects.filter(pk=task_id, campaign=campaign).only("role").first() if task_id else None
    if task is None:
        raise RoutingError("No such task in this campaign.", "no_task", 404)
    if task.role in (Task.Role.TRAINING, Task.Role.QUALIFICATION):
        error = RoutingError("Training and qualification items cannot be skipped.", "not_skippable", 400)
        return _refusal(request, access, error, task_id, None, {})
    # Take the next task before giving this one back, or routing would hand the same one out again.
    routing.claim_real(campaign, worker, access.membership, timezone.now())
    routing.release(campaign, worker, task_id)
    if not (request.htmx and not request.htmx.boosted):
        return redirect("annotate", campaign.pk)
    served = serve(access)
    return render_panel(request, access, panel_context(access, served))
