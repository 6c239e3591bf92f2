"""Whole pages: the annotator's campaigns (also on their home page) and the work page."""
from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from annotation import routing
from annotation.models import Assignment, Campaign, GoldAnswer, Membership, Task, Vote, Worker
from annotation.routing import RoutingError
from captionlab import roles

from .access import Access, work_view
from .panel import curator_preview, feedback_for, panel_context, render_panel, serve


def annotator_campaigns(user) -> list[Campaign]:
    """The campaigns an annotator may work on (member, not blocked, or open to all), each with
    ``done`` (their votes) and ``remaining`` (open items they have not voted on): one query."""
    worker = Worker.objects.filter(user=user).first() if user.is_authenticated else None
    if worker is not None and worker.blocked:
        return []
    visible = Q(open_to_all=True, status=Campaign.Status.RUNNING)
    if worker is not None:
        member = Membership.objects.filter(campaign=OuterRef("pk"), worker=worker)
        blocked = member.filter(blocked=True)
        visible = (visible | Q(Exists(member))) & ~Q(Exists(blocked))
    qs = Campaign.objects.exclude(status=Campaign.Status.DRAFT).filter(visible)
    if worker is None:
        done = remaining = None
    else:
        votes = (Vote.objects.filter(campaign=OuterRef("pk"), worker=worker, role__in=(Task.Role.REAL, Task.Role.GOLD))
                 .order_by().values("campaign").annotate(n=Count("pk")).values("n"))
        voted = Vote.objects.filter(task=OuterRef("pk"), worker=worker)
        open_tasks = (Task.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL, status=Task.Status.OPEN)
                      .exclude(Exists(voted)).order_by().values("campaign").annotate(n=Count("pk")).values("n"))
        done = Coalesce(Subquery(votes, output_field=IntegerField()), 0)
        remaining = Coalesce(Subquery(open_tasks, output_field=IntegerField()), 0)
    if done is None:
        open_tasks = (Task.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL, status=Task.Status.OPEN)
                      .order_by().values("campaign").annotate(n=Count("pk")).values("n"))
        qs = qs.annotate(remaining=Coalesce(Subquery(open_tasks, output_field=IntegerField()), 0))
    else:
        qs = qs.annotate(done=done, remaining=remaining)
    campaigns = list(qs.order_by("-created_at"))
    for campaign in campaigns:
        campaign.done = getattr(campaign, "done", 0)
        total = campaign.done + campaign.remaining
        campaign.percent = int(100 * campaign.done / total) if total else 100
        campaign.kind_label = campaign.kind_spec.label
    return campaigns


def annotator_home_context(user) -> dict:
    """What templates/home/annotator.html needs (called by curation.views.home)."""
    return {"campaigns": annotator_campaigns(user)}


@require_GET
def work_list(request):
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not roles.user_roles(request.user):
        raise PermissionDenied("The work pages are for annotators.")
    context = {"campaigns": annotator_campaigns(request.user) if roles.has_role(request.user, roles.ANNOTATOR) else [],
               "previewable": []}
    if roles.has_role(request.user, roles.CURATOR):
        context["previewable"] = list(Campaign.objects.exclude(status=Campaign.Status.DRAFT).order_by("-created_at")[:50])
    return render(request, "annotation/work/list.html", context)


@work_view
@require_GET
def work_page(request, access: Access):
    """The task the annotator holds (a reload shows the same one), a training example's feedback
    (``?feedback=<vote>``, after a plain form post) or a vote re-opened by undo (``?edit=<vote>``)."""
    campaign, worker = access.campaign, access.worker
    if access.preview:
        return render_panel(request, access, panel_context(access, curator_preview(access)))
    if access.external is not None and access.external.state != Assignment.State.ACTIVE:
        return redirect("external-finish", campaign.pk)
    feedback_id, edit_id = request.GET.get("feedback", ""), request.GET.get("edit", "")
    if feedback_id.isdigit():
        vote = (Vote.objects.select_related("task").filter(pk=int(feedback_id), campaign=campaign, worker=worker,
                                                            role=Task.Role.TRAINING).first())
        if vote is not None:
            gold = GoldAnswer.objects.filter(task_id=vote.task_id).first()
            feedback = feedback_for(campaign.kind_spec, vote, gold)
            if feedback is not None:
                return render_panel(request, access, panel_context(access, None, feedback=feedback))
    if edit_id.isdigit():
        vote = routing.last_editable_vote(campaign, worker)
        if vote is not None and vote.pk == int(edit_id) and campaign.kind_spec.editable:
            return render_panel(request, access, panel_context(access, None, editing=vote))
        error = RoutingError("The edit window of that vote has closed.", "edit_closed", 409)
        served = serve(access)
        return render_panel(request, access, panel_context(access, served, error=error), status=error.status)
    served = serve(access)
    return render_panel(request, access, panel_context(access, served))
