"""The annotator's work pages: the campaigns list and the page that serves one task at a time.

Progressive enhancement: every action (vote, undo, skip, continue after a training example) is a
plain form POST or link that works without JavaScript (POST, then redirect, then GET). With htmx
the same forms carry ``hx-post`` and these views answer with the task panel only, so the next task
is swapped in without a page load. Refusals from routing (``RoutingError``) are shown in the panel
with their own HTTP status; the value the annotator typed or picked is put back into the form.

Who may use them: members of the campaign with the annotator role (``routing.membership_for``
raises 404 for strangers and 403 for blocked workers); curators and admins who are not members get
a read-only preview; users without a role get 403.

Queries per request are constant: the task comes with its image and caption
(``routing.next_task``), candidate captions come in one ``in_bulk`` and progress in three counts.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.html import strip_tags
from django.views.decorators.http import require_GET, require_POST

from captionlab import roles

from . import external, routing, services
from .kinds import CandidatesKind, SliderKind
from .markdown import render_markdown
from .models import Assignment, Campaign, Caption, GoldAnswer, Membership, Reservation, Task, Vote, Worker
from .routing import RoutingError

log = logging.getLogger(__name__)

PANEL = "annotation/work/_panel.html"
PAGE = "annotation/work/page.html"
PANEL_HEADER = "X-Annotate-Panel"  # annotate.js swaps 4xx answers into the panel only when present


# --- access ---------------------------------------------------------------------------------------


@dataclass
class Access:
    campaign: Campaign
    worker: Worker | None
    membership: Membership | None
    preview: bool = False
    external: Assignment | None = None  # a link-out / MTurk worker's assignment (no account)


def _access(request, campaign_id: int) -> Access:
    """Who is asking, for which campaign. Raises PermissionDenied (no role), Http404 (no campaign)
    or RoutingError (not a member: 404, blocked: 403)."""
    user = request.user
    if not roles.user_roles(user):
        raise PermissionDenied("The work pages are for annotators.")
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    is_curator = roles.has_role(user, roles.CURATOR)
    if roles.has_role(user, roles.ANNOTATOR):
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
                response = _render(request, access, _panel_context(access, None, error=error), status=error.status)
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
            return _render(request, access, _panel_context(access, None, error=error), status=error.status)

    return wrapper


def _framed_for_provider(campaign: Campaign, response):
    """An MTurk worker sees these pages inside MTurk's iframe: let MTurk's origins (and only
    them) frame the responses of an MTurk session; every other page keeps X-Frame-Options DENY."""
    if campaign.backend == Campaign.Backend.MTURK:
        from .views_mturk import framable

        return framable(response)
    return response


def _refused(request, error: RoutingError):
    response = render(request, "annotation/work/refused.html", {"error": error}, status=error.status)
    patch_vary_headers(response, ("HX-Request",))
    return response


# --- the annotator's campaigns (also on their home page) ------------------------------------------


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


# --- the work page --------------------------------------------------------------------------------


def _widget(kind) -> str:
    if kind.target == "image":
        return "write"
    if isinstance(kind, CandidatesKind):
        return "candidates"
    if isinstance(kind, SliderKind):
        return "slider"
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
    figures = services.worker_progress(campaign, worker)
    seconds = Membership.objects.filter(campaign=campaign, worker=worker).values_list("seconds", flat=True).first()
    total = figures["done"] + figures["remaining"]
    return {**figures, "seconds": int(seconds or 0), "elapsed": _duration(seconds or 0),
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
    context = {
        "campaign": campaign, "kind": kind, "widget": _widget(kind), "stage": stage,
        "message": served.message if served is not None else "", "task": task, "error": error,
        "editing": editing, "feedback": feedback, "preview": access.preview,
        "progress": _progress(campaign, access.worker),
        "can_undo": kind.target != "image" and not access.preview,
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
    if widget == "choices":
        picked = value.get("label")
        context["options"] = [{"value": v, "label": label, "key": key, "checked": picked == v}
                              for v, label, key in _options(kind)]
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
    if widget == "choices":
        labels = {c.value: c.label for c in kind.choices}
        return [labels.get(value.get("label"), str(value.get("label")))]
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


@work_view
@require_GET
def work_page(request, access: Access):
    """The task the annotator holds (a reload shows the same one), a training example's feedback
    (``?feedback=<vote>``, after a plain form post) or a vote re-opened by undo (``?edit=<vote>``)."""
    campaign, worker = access.campaign, access.worker
    if access.preview:
        return _render(request, access, _panel_context(access, _preview(access)))
    if access.external is not None and access.external.state != Assignment.State.ACTIVE:
        return redirect("external-finish", campaign.pk)
    feedback_id, edit_id = request.GET.get("feedback", ""), request.GET.get("edit", "")
    if feedback_id.isdigit():
        vote = (Vote.objects.select_related("task").filter(pk=int(feedback_id), campaign=campaign, worker=worker,
                                                            role=Task.Role.TRAINING).first())
        if vote is not None:
            gold = GoldAnswer.objects.filter(task_id=vote.task_id).first()
            feedback = _feedback_for(campaign.kind_spec, vote, gold)
            if feedback is not None:
                return _render(request, access, _panel_context(access, None, feedback=feedback))
    if edit_id.isdigit():
        vote = routing.last_editable_vote(campaign, worker)
        if vote is not None and vote.pk == int(edit_id) and campaign.kind_spec.target != "image":
            return _render(request, access, _panel_context(access, None, editing=vote))
        error = RoutingError("The edit window of that vote has closed.", "edit_closed", 409)
        served = _serve(access)
        return _render(request, access, _panel_context(access, served, error=error), status=error.status)
    served = _serve(access)
    return _render(request, access, _panel_context(access, served))


# --- votes ----------------------------------------------------------------------------------------


def _value_from_post(kind, post, task_candidates: list | None):
    """The vote value the kind validates, from the form fields of its widget."""
    widget = _widget(kind)
    if widget == "choices":
        label = post.get("label", "")
        if not label:
            raise RoutingError("Choose an answer first.", "invalid_value", 400)
        return label
    if widget == "slider":
        return post.get("score", "")
    if widget == "write":
        text = post.get("text", "")
        if text.strip() and not any(ch.isalpha() for ch in strip_tags(text)):
            raise RoutingError("The caption holds only HTML markup: describe the image in words.", "invalid_value", 400)
        return {"text": text}
    ratings, missing = {}, 0
    for cid in task_candidates or []:
        row = {}
        for dim in kind.dimensions:
            picked = post.get(f"r-{cid}-{dim}", "")
            if picked == "":
                missing += 1
            else:
                row[dim] = picked
        ratings[str(cid)] = row
    if missing:
        raise RoutingError(f"Rate every caption on every line: {missing} rating{'s' if missing != 1 else ''} "
                           "missing.", "invalid_value", 400)
    return {"ratings": ratings}


def _posted_value_for_display(kind, post, task_candidates) -> dict:
    """What the annotator sent, in the shape of a stored value, to put back into the form."""
    widget = _widget(kind)
    if widget == "choices":
        return {"label": post.get("label", "")}
    if widget == "slider":
        try:
            return {"score": float(post.get("score", ""))}
        except ValueError:
            return {}
    if widget == "write":
        return {"text": post.get("text", "")}
    return {"ratings": {str(cid): {dim: post.get(f"r-{cid}-{dim}") for dim in kind.dimensions
                                   if post.get(f"r-{cid}-{dim}")} for cid in task_candidates or []}}


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
    from .tasks import schedule_aggregation

    try:
        schedule_aggregation(campaign_id)
    except Exception:  # noqa: BLE001 - logged; the next vote schedules again
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
    if _widget(kind) == "candidates":
        candidates = Task.objects.filter(pk=task_id, campaign=campaign).values_list("candidates", flat=True).first()
    try:
        value = _value_from_post(kind, request.POST, candidates)
        if vote_id is not None:
            routing.edit_vote(campaign, worker, vote_id, value)
            _schedule(campaign.pk)
            return _after_vote(request, access, None)
        seconds = _seconds(request.POST, worker, task_id)
        result = routing.submit_vote(campaign, worker, task_id, value, seconds=seconds, membership=access.membership)
    except RoutingError as error:
        return _refusal(request, access, error, task_id, vote_id,
                        _posted_value_for_display(kind, request.POST, candidates))
    if result.created:
        _schedule(campaign.pk)
    return _after_vote(request, access, result)


def _after_vote(request, access: Access, result):
    campaign = access.campaign
    if result is not None and result.feedback is not None:
        if not (request.htmx and not request.htmx.boosted):
            return redirect(f"{reverse('annotate', args=[campaign.pk])}?feedback={result.vote.pk}")
        vote = result.vote
        feedback = {"correct": result.feedback["correct"],
                    "expected": _describe(campaign.kind_spec, result.feedback["expected"], vote.task),
                    "explanation": render_markdown(result.feedback.get("feedback", "")),
                    "is_write": campaign.kind_spec.target == "image"}
        return _render(request, access, _panel_context(access, None, feedback=feedback))
    if not (request.htmx and not request.htmx.boosted):
        return redirect("annotate", campaign.pk)
    served = _serve(access)
    return _render(request, access, _panel_context(access, served))


def _refusal(request, access: Access, error: RoutingError, task_id: int, vote_id: int | None, value: dict):
    """The refused answer's own task again with the message and what was typed, when the annotator
    still holds it (or is still editing it); otherwise the message and their next task."""
    campaign, worker = access.campaign, access.worker
    if vote_id is not None:
        vote = routing.last_editable_vote(campaign, worker)
        if vote is not None and vote.pk == vote_id:
            return _render(request, access, _panel_context(access, None, editing=vote, value=value, error=error),
                           status=error.status)
    try:
        served = _serve(access)
    except RoutingError:  # e.g. paused meanwhile: the refusal's own message is the one to read
        served = None
    same = served.task is not None and served.task.pk == task_id
    return _render(request, access, _panel_context(access, served, value=value if same else None, error=error),
                   status=error.status)


@work_view
@require_POST
def work_undo(request, access: Access):
    """Re-open the last vote that is still within the edit window, to change it."""
    if access.preview:
        raise _preview_refused()
    campaign, worker = access.campaign, access.worker
    if campaign.kind_spec.target == "image":
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
    return _render(request, access, _panel_context(access, None, editing=vote))


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
    routing._claim_real(campaign, worker, access.membership, timezone.now())
    routing.release(campaign, worker, task_id)
    if not (request.htmx and not request.htmx.boosted):
        return redirect("annotate", campaign.pk)
    served = _serve(access)
    return _render(request, access, _panel_context(access, served))


__all__ = ["annotator_campaigns", "annotator_home_context", "work_list", "work_page", "work_submit", "work_undo",
           "work_skip"]
