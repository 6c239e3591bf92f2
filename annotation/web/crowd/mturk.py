"""The page an MTurk HIT's ExternalQuestion frames (``mturk-task``).

MTurk opens ``/mturk/<campaign>/?assignmentId=...&hitId=...&workerId=...&turkSubmitTo=...``:

- while a worker previews the HIT, ``assignmentId`` is ``ASSIGNMENT_ID_NOT_AVAILABLE``: the page
  shows the instructions and an example item, read-only; nothing is reserved and a submission is
  refused;
- after they accept, the ids are checked (the HIT must be one of this campaign's; turkSubmitTo
  must be MTurk's), ``external.begin`` binds the browser session to (workerId, assignmentId,
  hitId), and the worker continues on the ordinary work pages. Their votes stay quarantined until
  the sync finds the assignment under that HIT and worker at MTurk (forged ids never count);
- when they finish, ``MTurkProvider.finish_assignment`` answers with a form that posts the
  assignmentId to turkSubmitTo + ``/mturk/externalSubmit``.

Only these responses may be framed, and only by MTurk's origins (CSP frame-ancestors); every
other page keeps ``X-Frame-Options: DENY``.
"""
from __future__ import annotations

from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation import external
from annotation.markdown import render_markdown
from annotation.models import Assignment, Campaign, ProviderJob, Task
from annotation.providers.base import ProviderError, get_provider
from annotation.providers.mturk.frame import SESSION_KEY, framable, valid_submit_to
from annotation.providers.mturk.layout import ID_RE, PREVIEW_ASSIGNMENT_ID


def _message(request, campaign, title: str, message: str, status: int) -> HttpResponse:
    html = render_to_string("annotation/mturk/message.html",
                            {"campaign": campaign, "title": title, "message": message}, request=request)
    return framable(HttpResponse(html, status=status))


def _example(campaign: Campaign) -> Task | None:
    return (campaign.tasks.filter(role=Task.Role.TRAINING).select_related("image", "caption")
            .order_by("position", "pk").first()
            or campaign.tasks.filter(role=Task.Role.REAL).select_related("image", "caption")
            .order_by("position", "pk").first())


@require_http_methods(["GET", "POST"])
def mturk_task(request, campaign_id: int):
    campaign = get_object_or_404(Campaign, pk=campaign_id, backend=Campaign.Backend.MTURK)
    params = request.GET if request.method == "GET" else request.POST
    assignment_id = params.get("assignmentId", "").strip()
    if not assignment_id or assignment_id == PREVIEW_ASSIGNMENT_ID:
        if request.method == "POST":
            return _message(request, campaign, "Preview only",
                            "This is a preview of the HIT: accept it on MTurk before you answer. "
                            "Nothing was recorded.", 409)
        return _preview(request, campaign)
    if request.method == "POST":
        return _message(request, campaign, "Use the task pages",
                        "Answers are given on the task pages; nothing was recorded from this form.", 405)
    if campaign.status != Campaign.Status.RUNNING:
        return _message(request, campaign, "Not accepting work",
                        f"This campaign is {campaign.get_status_display().lower()}; please return the HIT.", 409)
    worker_id, hit_id = params.get("workerId", "").strip(), params.get("hitId", "").strip()
    if not all(ID_RE.match(x) for x in (worker_id, hit_id, assignment_id)):
        return _message(request, campaign, "Missing HIT details",
                        "The page needs MTurk's workerId, assignmentId and hitId. Open the HIT from MTurk again.", 400)
    submit_to = valid_submit_to(params.get("turkSubmitTo", ""))
    if submit_to is None:
        return _message(request, campaign, "Unknown submit address",
                        "turkSubmitTo is not an MTurk address, so the work could not be submitted. "
                        "Open the HIT from MTurk again.", 400)
    job = ProviderJob.objects.filter(campaign=campaign, provider="mturk", external_id=hit_id).first()
    if job is None or job.status == ProviderJob.Status.FINISHED:
        return _message(request, campaign, "Unknown HIT",
                        "This HIT is not one of this campaign's open HITs. Nothing was recorded.", 400)
    external.ensure_session(request)  # outside begin's transaction: a refusal must not roll the session back
    try:
        worker, assignment = external.begin(request, campaign, provider="mturk", external_worker_id=worker_id,
                                            external_assignment_id=assignment_id, job=job,
                                            extra={"hit_id": hit_id})
    except ProviderError as exc:
        return _message(request, campaign, "Cannot start", exc.message, 403 if exc.code == "blocked" else 409)
    if assignment.provider_job_id != hit_id or assignment.job_id != job.pk:
        if assignment.provider_job_id and assignment.provider_job_id != hit_id:
            return _message(request, campaign, "Mismatched HIT",
                            "This assignment belongs to another HIT. Nothing was recorded.", 409)
        Assignment.objects.filter(pk=assignment.pk).update(provider_job_id=hit_id, job=job)
    sessions = dict(request.session.get(SESSION_KEY) or {})
    sessions[str(campaign.pk)] = {"assignment_id": assignment_id, "hit_id": hit_id, "worker_id": worker_id,
                                  "turk_submit_to": submit_to}
    request.session[SESSION_KEY] = sessions
    if assignment.state != Assignment.State.ACTIVE:  # finished before: the submit form again (harmless)
        return get_provider("mturk").finish_assignment(request, campaign, assignment)
    return framable(HttpResponseRedirect(reverse("annotate", args=[campaign.pk])))


def _preview(request, campaign: Campaign) -> HttpResponse:
    task = _example(campaign)
    html = render_to_string("annotation/mturk/preview.html", {
        "campaign": campaign, "task": task, "instructions_html": render_markdown(campaign.instructions),
        "kind": campaign.kind_spec, "running": campaign.status == Campaign.Status.RUNNING,
        "tasks_per_assignment": (campaign.provider_config or {}).get("tasks_per_assignment"),
    }, request=request)
    return framable(HttpResponse(html))


def mturk_example_image(request, campaign_id: int):
    """The preview's example image: public like the preview itself, and only that one image."""
    from curation.views_media import serve

    campaign = get_object_or_404(Campaign, pk=campaign_id, backend=Campaign.Backend.MTURK)
    task = _example(campaign)
    if task is None:
        raise Http404("This campaign has no items.")
    image = task.image
    return serve(image.file, image.content_type, f"{image.pk}.{image.extension}")
