"""Who is asking for a work page, and the decorator that turns refusals into their message."""
from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers

from annotation import external, routing
from annotation.models import Campaign
from annotation.routing import RoutingError
from captionlab import roles

from .panel import Access, panel_context, render_panel


def _access(request, campaign_id: int) -> Access:
    """Who is asking, for which campaign. Raises PermissionDenied (no role), Http404 (no campaign)
    or RoutingError (not a member: 404, blocked: 403)."""
    user = request.user
    if user.is_active:
        membership = routing.member_access(user, campaign_id)  # the usual case: one statement, roles too
        if membership is not None and roles.has_role(user, roles.ANNOTATOR):
            routing.refuse_blocked(membership, membership.worker)
            return Access(membership.campaign, membership.worker, membership)
    if not roles.user_roles(user):
        raise PermissionDenied("The work pages are for annotators.")
    is_annotator = roles.has_role(user, roles.ANNOTATOR)
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    is_curator = roles.has_role(user, roles.CURATOR)
    if is_annotator:
        worker = routing.worker_for_user(user)
        try:
            return Access(campaign, worker, routing.membership_for(campaign, worker))
        except RoutingError as error:
            if not (is_curator and error.code == "not_member"):
                raise
    return Access(campaign, None, None, preview=True)  # a curator or admin who is not a member


def _external_access(request, campaign_id: int) -> Access | None:
    """An external worker of this browser session (external.begin), or None. Raises RoutingError
    when they are blocked."""
    if not request.session.get(external.SESSION_KEY):
        return None
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return None
    found = external.current(request, campaign)
    if found is None:
        return None
    worker, assignment = found
    return Access(campaign, worker, routing.membership_for(campaign, worker, join=False), external=assignment)


def needs_consent(request, campaign: Campaign) -> bool:
    """A link-out participant sees the consent page before any work."""
    if campaign.backend != Campaign.Backend.LINKOUT:
        return False
    info = external.session_info(request, campaign) or {}
    return not info.get("consented_at")


def work_view(view):
    """Login, access and refusals for the work views: a RoutingError becomes its message and status.
    An external worker (link-out participant, MTurk worker) of this browser session comes first."""

    @wraps(view)
    def wrapper(request, campaign_id: int, *args, **kwargs):
        try:
            access = _external_access(request, campaign_id)
        except RoutingError as error:
            return _refused(request, error)
        if access is not None:
            if needs_consent(request, access.campaign):
                return redirect("linkout-consent", access.campaign.public_token or "-")
            try:
                response = view(request, access, *args, **kwargs)
            except RoutingError as error:
                response = render_panel(request, access, panel_context(access, None, error=error), status=error.status)
            return _framed_for_provider(access.campaign, response)
        if not request.user.is_authenticated:
            if request.htmx:  # a swapped-in login form would be useless: send the whole page there
                response = HttpResponse(status=204)
                response["HX-Redirect"] = f"{reverse('login')}?next={reverse('annotate', args=[campaign_id])}"
                return response
            return redirect_to_login(request.get_full_path())
        try:
            access = _access(request, campaign_id)
        except RoutingError as error:
            return _refused(request, error)
        try:
            return view(request, access, *args, **kwargs)
        except RoutingError as error:  # e.g. the campaign is paused: a message with its status
            return render_panel(request, access, panel_context(access, None, error=error), status=error.status)

    return wrapper


def _framed_for_provider(campaign: Campaign, response):
    """An MTurk worker sees these pages inside MTurk's iframe: let MTurk's origins (and only
    them) frame the responses of an MTurk session; every other page keeps X-Frame-Options DENY."""
    if campaign.backend == Campaign.Backend.MTURK:
        from annotation.web.crowd.mturk import framable

        return framable(response)
    return response


def _refused(request, error: RoutingError):
    response = render(request, "annotation/work/refused.html", {"error": error}, status=error.status)
    patch_vary_headers(response, ("HX-Request",))
    return response
