"""The curator's provider page of a campaign and its actions: the page itself, the link-out settings
form, launch / pause / extend / finish / sync, approve / reject / bonus of one assignment, the
marketplace CSV export and status import, and the MTurk batch CSV export and import. Errors of a
provider (``ProviderError``) are shown on the page with a 400 or 409; nothing is half-launched
because each provider call is one transaction.
"""
from __future__ import annotations

import secrets

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET, require_POST

from annotation import batch_csv
from annotation.models import Assignment, Campaign
from annotation.providers import controls, linkout, linkout_files, money
from annotation.providers.base import ProviderError, get_provider
from annotation.services import CampaignError
from captionlab import roles
from captionlab.roles import role_required

from .helpers import cents, int_param, linkout_campaign, page, report_text, upload_text

# --- curators: the provider page and its actions -----------------------------------------------


@role_required(roles.CURATOR)
@require_GET
def campaign_provider(request, pk):
    return page(request, linkout_campaign(pk))


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
        value = int_param(post.get(key, ""), 0)
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
    reward, budget = cents(post.get("reward", "0") or "0"), cents(post.get("budget", "0") or "0")
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
    campaign = linkout_campaign(pk)
    try:
        if action == "settings":
            errors = _save_settings(request, campaign)
            if errors:
                return page(request, campaign, status=400, errors=errors, form=request.POST)
            messages.success(request, "Settings saved.")
        elif action == "launch":
            if campaign.backend == Campaign.Backend.MTURK:
                from annotation.tasks_providers import provider_publish  # written with the MTurk provider

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
            extra = int_param(request.POST.get("extra_assignments", ""), 0)
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
                report = linkout_files.sync_api(campaign)
                messages.success(request, report_text(report))
            else:
                from annotation.tasks_providers import provider_sync  # MTurk's sync task

                try:
                    provider_sync.delay(campaign.pk)
                except Exception as exc:  # noqa: BLE001 - a broker that is down: say so
                    raise ProviderError(f"The task queue is not reachable ({exc}).", code="broker") from None
                messages.success(request, "Sync queued.")
        else:
            raise Http404("No such action.")
    except ProviderError as error:
        campaign.refresh_from_db()
        return page(request, campaign, status=409 if error.code != "bad_request" else 400, error=error.message)
    except ImportError:
        return page(request, campaign, status=503, error="The MTurk provider is not installed on this server.")
    return redirect("campaign-provider", campaign.pk)


@role_required(roles.CURATOR)
@require_POST
def provider_assignment(request, pk, assignment_id, op):
    campaign = linkout_campaign(pk)
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
            amount = cents(request.POST.get("amount", ""))
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
        return page(request, campaign, status=400 if error.code == "bad_request" else 409, error=error.message)
    return redirect("campaign-provider", campaign.pk)


@role_required(roles.CURATOR)
@require_GET
def provider_export(request, pk, kind):
    campaign = linkout_campaign(pk)
    try:
        text = linkout_files.export_csv(campaign, kind)
    except ProviderError:
        raise Http404("No such export.") from None
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{kind}.csv"'
    return response


@role_required(roles.CURATOR)
@require_POST
def provider_import(request, pk):
    """The marketplace's status / approvals CSV: confirms and approves / rejects (idempotent)."""
    campaign = linkout_campaign(pk)
    text, problem = upload_text(request)
    if text is None:
        return page(request, campaign, status=400, error=problem)
    report = linkout_files.import_statuses(campaign, text)
    status = 400 if report["problems"] and not any(report[k] for k in ("approved", "rejected", "confirmed",
                                                                        "expired", "unchanged")) else 200
    return page(request, campaign, status=status, import_report=report, import_summary=report_text(report))


@role_required(roles.CURATOR)
@require_GET
def batch_export(request, pk):
    campaign = linkout_campaign(pk)
    response = HttpResponse(batch_csv.export_batch(campaign), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-batch-results.csv"'
    return response


@role_required(roles.CURATOR)
@require_POST
def batch_import(request, pk):
    campaign = linkout_campaign(pk)
    text, problem = upload_text(request)
    if text is None:
        return page(request, campaign, status=400, error=problem)
    mapping = {k: request.POST.get(k, "").strip() for k in ("image_column", "answer_column", "match")}
    try:
        report = batch_csv.import_batch(campaign, text, **{k: v for k, v in mapping.items() if v})
    except batch_csv.BatchError as error:
        return page(request, campaign, status=400, error=error.message)
    status = 200 if report.imported or not report.problems else 400
    return page(request, campaign, status=status, batch_report=report)
