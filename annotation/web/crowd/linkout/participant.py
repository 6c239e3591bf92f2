"""The worker's pages of an external crowd (no account): the link-out start URL
(``/x/<public_token>/start?PROLIFIC_PID=...``) that admits a marketplace participant and opens their
assignment, the consent page, the Finish step shared by every external provider (``external-finish``,
shown inside MTurk's iframe for MTurk campaigns) and the item images served to that browser session.
Refusals are rendered by ``_refuse`` with the status that says why.
"""
from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.db import transaction
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from annotation import external, routing
from annotation.markdown import render_markdown
from annotation.models import Assignment, Campaign, Membership, Reservation
from annotation.providers import linkout
from annotation.providers.base import ProviderError, get_provider

# --- workers: start, consent, finish ---------------------------------------------------------


def _refuse(request, title: str, message: str, status: int, campaign=None):
    return render(request, "annotation/linkout/refused.html",
                  {"title": title, "message": message, "status": status, "campaign": campaign}, status=status)


def _linkout_campaign(token: str) -> Campaign:
    if not token or len(token) > 64:
        raise Http404("No such study.")
    return get_object_or_404(Campaign, public_token=token, backend=Campaign.Backend.LINKOUT)


@require_GET
def linkout_start(request, token):
    """The marketplace sends its participant here with its ids in the query string."""
    campaign = _linkout_campaign(token)
    cfg = linkout.config(campaign)
    if campaign.status != Campaign.Status.RUNNING:
        return _refuse(request, "This study is not open",
                       f"This study is {campaign.get_status_display().lower()} at the moment. Please return it "
                       "on the marketplace.", 409, campaign)
    pid = request.GET.get(cfg["participant_param"], "").strip()
    study = request.GET.get(cfg["study_param"], "").strip()
    session_id = request.GET.get(cfg["session_param"], "").strip()
    if not pid:
        return _refuse(request, "Participant id missing",
                       f"The link did not carry your participant id (the {cfg['participant_param']} parameter). "
                       "Please open the study again from the marketplace.", 400, campaign)
    for label, value in (("participant id", pid), ("study id", study), ("session id", session_id)):
        if value and not linkout.valid_id(value):
            return _refuse(request, "This link is not valid",
                           f"The {label} in the link is not valid: ids are 1 to 64 letters, digits, - or _. "
                           "Please open the study again from the marketplace.", 400, campaign)
    expected_study = str(cfg.get("study_id") or "")
    if expected_study and study and study != expected_study:
        return _refuse(request, "This link belongs to another study",
                       "The study id in the link is not this study's. Please open the study again from the "
                       "marketplace.", 400, campaign)
    external.ensure_session(request)  # outside the transaction: a refusal must not roll the session back
    try:
        with transaction.atomic():  # the place is checked and taken in one transaction
            linkout.admit(campaign, pid)
            worker, assignment = external.begin(
                request, campaign, provider="linkout", external_worker_id=pid, external_assignment_id=session_id,
                extra={"study_id": study, "session_id": session_id, "job_external_id": study})
    except ProviderError as error:
        if error.code == "second_identity":
            return _refuse(request, "Already taken under another id", error.message, 409, campaign)
        if error.code == "other_browser":
            return _refuse(request, "Already started in another browser", error.message, 409, campaign)
        if error.code == "full":
            return _refuse(request, "This study is full", error.message, 409, campaign)
        return _refuse(request, "You cannot take part", error.message, 403, campaign)
    if assignment.state != Assignment.State.ACTIVE:
        return redirect("external-finish", campaign.pk)
    if linkout_needs_consent(request, campaign):
        return redirect("linkout-consent", campaign.public_token)
    return redirect("annotate", campaign.pk)


def linkout_needs_consent(request, campaign) -> bool:
    info = external.session_info(request, campaign) or {}
    return not info.get("consented_at")


@require_http_methods(["GET", "POST"])
def linkout_consent(request, token):
    campaign = _linkout_campaign(token)
    found = external.current(request, campaign)
    if found is None:
        return _refuse(request, "Start from the marketplace",
                       "Open this study from the marketplace's link: it tells us your participant id.", 403, campaign)
    cfg = linkout.config(campaign)
    if request.method == "POST":
        if request.POST.get("consent") == "yes":
            external.set_flag(request, campaign, "consented_at", timezone.now().isoformat())
            return redirect("annotate", campaign.pk)
        return render(request, "annotation/linkout/declined.html", {"campaign": campaign})
    return render(request, "annotation/linkout/consent.html", {
        "campaign": campaign, "consent_html": render_markdown(cfg.get("consent") or linkout.DEFAULT_CONSENT),
        "instructions_html": render_markdown(campaign.instructions),
        "participant": found[0].external_id})


def _framed(view):
    """Responses to an MTurk campaign's worker are shown inside MTurk's iframe."""

    @wraps(view)
    def wrapper(request, campaign_id, *args, **kwargs):
        response = view(request, campaign_id, *args, **kwargs)
        campaign = Campaign.objects.filter(pk=campaign_id).only("backend").first()
        if campaign is not None and campaign.backend == Campaign.Backend.MTURK:
            from annotation.web.crowd.mturk import framable

            return framable(response)
        return response

    return wrapper


@require_http_methods(["GET", "POST"])
@_framed
def external_finish(request, campaign_id):
    """The worker's Finish: the assignment is submitted (once; a replay shows the same end) and the
    provider says what the browser gets (completion code and redirect, or MTurk's post-back)."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    found = external.current(request, campaign)
    if found is None:
        return _refuse(request, "No session", "This browser has no session on this study: open it again from "
                                              "the marketplace.", 403, campaign)
    worker, assignment = found
    provider = get_provider(campaign.backend)
    if assignment.state == Assignment.State.ACTIVE:
        if request.method != "POST":
            return redirect("annotate", campaign.pk)
        if external.quota_left(campaign, assignment) != 0:
            # early finish is allowed only when nothing is left for this worker
            membership = Membership.objects.filter(campaign=campaign, worker=worker).first()
            try:
                served = routing.next_task(campaign, worker, membership) if membership else None
            except routing.RoutingError:
                served = None
            if served is not None and served.stage == "failed":
                return _refuse(request, "Not qualified", served.message + " Please return the study on the "
                                                                         "marketplace.", 403, campaign)
            if served is not None and served.task is not None:
                messages.info(request, "There are items left for you; finish them first.")
                return redirect("annotate", campaign.pk)
        with transaction.atomic():
            assignment = Assignment.objects.select_for_update().get(pk=assignment.pk)
            if assignment.state == Assignment.State.ACTIVE:
                code_for = getattr(provider, "completion_code_for", None)
                assignment.completion_code = (code_for(campaign, assignment) if code_for else "")[:64]
                assignment.state = Assignment.State.SUBMITTED
                assignment.submitted_at = timezone.now()
                assignment.save(update_fields=["completion_code", "state", "submitted_at", "last_seen_at"])
        for task_id in list(Reservation.objects.filter(campaign=campaign, worker=worker)
                            .values_list("task_id", flat=True)):
            routing.release(campaign, worker, task_id)
    return provider.finish_assignment(request, campaign, assignment)


@require_GET
def external_image(request, campaign_id, image_id):
    """An item's image for the external worker of this browser session (they have no account, so
    curation's image view, which needs a role, is not theirs): only images of this campaign's items."""
    from curation.models import Image
    from curation.views_media import serve

    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if external.current(request, campaign) is None:
        raise Http404("No such image.")
    if not campaign.tasks.filter(image_id=image_id).exists():
        raise Http404("No such image.")
    image = get_object_or_404(Image, pk=image_id)
    return serve(image.file, image.content_type, f"{image.pk}.{image.extension}")
