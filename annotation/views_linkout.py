"""Pages of external crowds.

Workers (no account): the link-out start URL (``/x/<public_token>/start?PROLIFIC_PID=...``), the
consent page, and the Finish step shared by every external provider (``external-finish``).

Curators: the provider page of a campaign (launch, pause, extend, finish, the public start URL,
jobs, assignments with approve / reject / bonus, the marketplace CSV files, MTurk batch CSV files
and the cost summary). Errors of a provider (``ProviderError``) are shown on the page; nothing is
half-launched because each provider call is one transaction.
"""
from __future__ import annotations

from functools import wraps

import logging
import secrets

from django.contrib import messages
from django.db import transaction
from django.db.models import Count, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from captionlab import roles
from captionlab.roles import role_required

from . import batch_csv, external, routing
from .markdown import render_markdown
from .models import Assignment, Campaign, Membership, ProviderJob, Reservation
from .providers import controls, linkout, money
from .services import CampaignError
from .providers.base import ProviderError, get_provider

log = logging.getLogger(__name__)

MAX_UPLOAD = 20 * 1024 * 1024


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
            from .views_mturk import framable

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
    from curation.views_media import _serve

    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if external.current(request, campaign) is None:
        raise Http404("No such image.")
    if not campaign.tasks.filter(image_id=image_id).exists():
        raise Http404("No such image.")
    image = get_object_or_404(Image, pk=image_id)
    return _serve(image.file, image.content_type, f"{image.pk}.{image.extension}")


# --- curators: the provider page ---------------------------------------------------------------


def _campaign(pk) -> Campaign:
    return get_object_or_404(Campaign.objects.select_related("collection"), pk=pk)


def assignment_rows(campaign: Campaign, limit: int = 500) -> list[dict]:
    assignments = list(Assignment.objects.filter(campaign=campaign).select_related("worker")
                       .annotate(n_votes=Count("votes", filter=Q(votes__role__in=("real", "gold"))),
                                 n_quarantined=Count("votes", filter=Q(votes__quarantined=True)),
                                 gold_seen=Count("votes", filter=Q(votes__role="gold")),
                                 gold_ok=Count("votes", filter=Q(votes__role="gold", votes__correct=True)))
                       .order_by("-started_at")[:limit])
    rows = []
    for a in assignments:
        rows.append({"a": a, "votes": a.n_votes, "quarantined": a.n_quarantined,
                     "gold": (a.gold_ok / a.gold_seen) if a.gold_seen else None,
                     "minutes": round(a.seconds / 60, 1)})
    return rows


def cost_context(campaign: Campaign) -> dict:
    s = money.summary(campaign)
    budget = max(campaign.budget_cents, s["spent"] + s["committed"], 1)
    width = 300
    bars = []
    x = 0
    for key, label, css in (("spent", "Spent", "#3b5bdb"), ("committed", "Committed", "#f59f00"),
                            ("remaining", "Remaining", "#d0d5dd")):
        value = max(s[key], 0)
        w = round(width * value / budget, 1)
        bars.append({"key": key, "label": label, "x": x, "w": w, "color": css, "text": money.format_cents(value)})
        x += w
    return {"cost": s, "cost_bars": bars, "cost_width": width,
            "cost_text": {k: money.format_cents(v) if isinstance(v, int) else v for k, v in s.items()},
            "cost_per_vote": money.format_cents(s["cost_per_vote"]),
            "cost_per_caption": money.format_cents(s["cost_per_caption"])}


def _provider_context(campaign: Campaign) -> dict:
    try:
        provider = get_provider(campaign.backend)
        ready, creds = provider.credentials_status(campaign)
    except ProviderError as error:
        provider, ready, creds = None, False, error.message
    start_url = ""
    if campaign.public_token and campaign.backend == Campaign.Backend.LINKOUT:
        start_url = reverse("linkout-start", args=[campaign.public_token])
    cfg = linkout.config(campaign) if campaign.backend == Campaign.Backend.LINKOUT else dict(campaign.provider_config or {})
    return {"campaign": campaign, "provider": provider, "credentials_ready": ready, "credentials_text": creds,
            "start_path": start_url, "cfg": cfg, "reward_text": f"{campaign.reward_cents / 100:.2f}",
            "budget_text": f"{campaign.budget_cents / 100:.2f}",
            "jobs": list(ProviderJob.objects.filter(campaign=campaign).order_by("pk")[:200]),
            "rows": assignment_rows(campaign), "publish_progress": (campaign.provider_config or {}).get("publish_progress"),
            **cost_context(campaign)}


def _page(request, campaign, status=200, **extra):
    context = _provider_context(campaign)
    context.update(extra)
    if context["start_path"]:
        context["start_url"] = request.build_absolute_uri(context["start_path"])
        cfg = context["cfg"]
        context["start_url_full"] = (f"{context['start_url']}?{cfg['participant_param']}={{{{%PROLIFIC_PID%}}}}"
                                     f"&{cfg['study_param']}={{{{%STUDY_ID%}}}}&{cfg['session_param']}={{{{%SESSION_ID%}}}}")
    return render(request, "annotation/provider/page.html", context, status=status)


@role_required(roles.CURATOR)
@require_GET
def campaign_provider(request, pk):
    return _page(request, _campaign(pk))


def _int(value, default=0) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None if value not in (None, "") else default


def _cents(value) -> int | None:
    """'1.50' (currency units) -> 150; None when not a number >= 0."""
    from decimal import Decimal, InvalidOperation

    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    if amount < 0 or amount != amount or amount > 100000:
        return None
    return int((amount * 100).quantize(Decimal("1")))


def _save_settings(request, campaign: Campaign) -> list[str]:
    """The link-out settings form; returns the problems (nothing is saved when there are any)."""
    post = request.POST
    errors = []
    cfg = dict(campaign.provider_config or {})
    for key in ("participant_param", "study_param", "session_param"):
        value = post.get(key, "").strip() or linkout.DEFAULTS[key]
        cfg[key] = value
    cfg["consent"] = post.get("consent", "")[:20000]
    code = post.get("completion_code", "").strip()
    cfg["completion_code_per_assignment"] = post.get("completion_code_per_assignment") == "on"
    if code and not linkout.CODE_RE.match(code):
        errors.append("The completion code must be 4 to 40 letters, digits, - or _.")
    cfg["completion_code"] = code
    url = post.get("completion_url", "").strip()
    if url:
        try:
            linkout.check_completion_url(url)
        except ProviderError as error:
            errors.append(error.message)
    cfg["completion_url"] = url
    for key, label in (("places", "places"), ("tasks_per_assignment", "tasks per participant")):
        value = _int(post.get(key, ""), 0)
        if value is None or value < 0 or value > 100000:
            errors.append(f"The number of {label} must be a whole number from 0 to 100000.")
        else:
            cfg[key] = value
    rate = post.get("fee_rate", "").strip()
    if rate:
        try:
            if not 0 <= float(rate) <= 5:
                raise ValueError
            cfg["fee_rate"] = float(rate)
        except ValueError:
            errors.append("The fee rate must be a number such as 0.33.")
    else:
        cfg.pop("fee_rate", None)
    cfg["api"] = "prolific" if post.get("api") == "prolific" else ""
    reward, budget = _cents(post.get("reward", "0") or "0"), _cents(post.get("budget", "0") or "0")
    if reward is None or budget is None:
        errors.append("Reward and budget are amounts such as 1.50.")
    if errors:
        return errors
    if campaign.status != Campaign.Status.DRAFT and reward != campaign.reward_cents:
        return ["The reward cannot change after launch."]
    try:  # the same rules as the crowd settings page, the API and the command
        controls.update_controls(campaign, {"reward_cents": reward, "budget_cents": budget, "provider_config": cfg})
    except CampaignError as error:
        return [error.message]
    return []


@role_required(roles.CURATOR)
@require_POST
def provider_action(request, pk, action):
    campaign = _campaign(pk)
    try:
        if action == "settings":
            errors = _save_settings(request, campaign)
            if errors:
                return _page(request, campaign, status=400, errors=errors, form=request.POST)
            messages.success(request, "Settings saved.")
        elif action == "launch":
            if campaign.backend == Campaign.Backend.MTURK:
                from .tasks_providers import provider_publish  # written with the MTurk provider

                ready, why = get_provider(campaign.backend).credentials_status(campaign)
                if not ready:
                    raise ProviderError(f"{why} Nothing was launched.", code="credentials")
                try:
                    provider_publish.delay(campaign.pk)
                except Exception as exc:  # noqa: BLE001 - a broker that is down: a message, nothing launched
                    raise ProviderError(f"The task queue is not reachable ({exc}); nothing was launched.",
                                        code="broker") from None
                messages.success(request, "Publishing the HITs: progress below.")
            else:
                get_provider(campaign.backend).publish(campaign)
                messages.success(request, f"“{campaign.name}” is launched.")
        elif action == "pause":
            get_provider(campaign.backend).pause(campaign)
            messages.success(request, "Paused.")
        elif action == "extend":
            extra = _int(request.POST.get("extra_assignments", ""), 0)
            if extra is None or extra <= 0 or extra > 100000:
                raise ProviderError("Say how many places (assignments) to add: a whole number above 0.",
                                    code="bad_request")
            get_provider(campaign.backend).extend(campaign, extra_assignments=extra)
            messages.success(request, f"Added {extra} places.")
        elif action == "finish":
            get_provider(campaign.backend).finish(campaign)
            messages.success(request, "Finished.")
        elif action == "sync":
            if campaign.backend == Campaign.Backend.LINKOUT:
                report = linkout.sync_api(campaign)
                messages.success(request, _report_text(report))
            else:
                from .tasks_providers import provider_sync  # MTurk's sync task

                try:
                    provider_sync.delay(campaign.pk)
                except Exception as exc:  # noqa: BLE001 - a broker that is down: say so
                    raise ProviderError(f"The task queue is not reachable ({exc}).", code="broker") from None
                messages.success(request, "Sync queued.")
        else:
            raise Http404("No such action.")
    except ProviderError as error:
        campaign.refresh_from_db()
        return _page(request, campaign, status=409 if error.code != "bad_request" else 400, error=error.message)
    except ImportError:
        return _page(request, campaign, status=503, error="The MTurk provider is not installed on this server.")
    return redirect("campaign-provider", campaign.pk)


def _report_text(report: dict) -> str:
    parts = [f"{report.get(k, 0)} {k}" for k in ("approved", "rejected", "confirmed", "expired", "unchanged")]
    return "Imported: " + ", ".join(parts) + (f"; {len(report['problems'])} problems" if report.get("problems") else "")


@role_required(roles.CURATOR)
@require_POST
def provider_assignment(request, pk, assignment_id, op):
    campaign = _campaign(pk)
    assignment = get_object_or_404(Assignment, pk=assignment_id, campaign=campaign)
    feedback = request.POST.get("feedback", "").strip()[:2000]
    try:
        provider = get_provider(campaign.backend)
        if op == "approve":
            provider.approve(assignment, feedback)
            messages.success(request, f"Approved {assignment.worker}.")
        elif op == "reject":
            if not feedback:
                raise ProviderError("A rejection needs feedback text that tells the worker why.", code="bad_request")
            provider.reject(assignment, feedback)
            messages.success(request, f"Rejected {assignment.worker}.")
        elif op == "bonus":
            amount = _cents(request.POST.get("amount", ""))
            if not amount:
                raise ProviderError("A bonus is an amount above 0, such as 0.50.", code="bad_request")
            if not feedback:
                raise ProviderError("Say why the bonus is given (the worker sees it).", code="bad_request")
            token = request.POST.get("token", "").strip()[:40] or secrets.token_hex(8)
            provider.bonus(assignment, amount, feedback, f"bonus:{assignment.pk}:{token}")
            messages.success(request, f"Bonus of {money.format_cents(amount)} for {assignment.worker}.")
        else:
            raise Http404("No such action.")
    except ProviderError as error:
        return _page(request, campaign, status=400 if error.code == "bad_request" else 409, error=error.message)
    return redirect("campaign-provider", campaign.pk)


@role_required(roles.CURATOR)
@require_GET
def provider_export(request, pk, kind):
    campaign = _campaign(pk)
    try:
        text = linkout.export_csv(campaign, kind)
    except ProviderError:
        raise Http404("No such export.") from None
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{kind}.csv"'
    return response


def _upload_text(request) -> tuple[str | None, str]:
    upload = request.FILES.get("file")
    if upload is None:
        return None, "Choose a CSV file to import."
    if upload.size > MAX_UPLOAD:
        return None, "The file is larger than 20 MB."
    raw = upload.read()
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return raw.decode(encoding), ""
        except UnicodeDecodeError:
            continue
    return None, "The file is not text (UTF-8)."


@role_required(roles.CURATOR)
@require_POST
def provider_import(request, pk):
    """The marketplace's status / approvals CSV: confirms and approves / rejects (idempotent)."""
    campaign = _campaign(pk)
    text, problem = _upload_text(request)
    if text is None:
        return _page(request, campaign, status=400, error=problem)
    report = linkout.import_statuses(campaign, text)
    status = 400 if report["problems"] and not any(report[k] for k in ("approved", "rejected", "confirmed",
                                                                        "expired", "unchanged")) else 200
    return _page(request, campaign, status=status, import_report=report, import_summary=_report_text(report))


@role_required(roles.CURATOR)
@require_GET
def batch_export(request, pk):
    campaign = _campaign(pk)
    response = HttpResponse(batch_csv.export_batch(campaign), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-batch-results.csv"'
    return response


@role_required(roles.CURATOR)
@require_POST
def batch_import(request, pk):
    campaign = _campaign(pk)
    text, problem = _upload_text(request)
    if text is None:
        return _page(request, campaign, status=400, error=problem)
    mapping = {k: request.POST.get(k, "").strip() for k in ("image_column", "answer_column", "match")}
    try:
        report = batch_csv.import_batch(campaign, text, **{k: v for k, v in mapping.items() if v})
    except batch_csv.BatchError as error:
        return _page(request, campaign, status=400, error=error.message)
    status = 200 if report.imported or not report.problems else 400
    return _page(request, campaign, status=status, batch_report=report)


__all__ = ["linkout_start", "linkout_consent", "external_finish", "campaign_provider", "provider_action",
           "provider_assignment", "provider_export", "provider_import", "batch_export", "batch_import",
           "cost_context"]
