"""Helpers of the curator's provider page: the campaign lookup, the assignment rows and the cost
summary (``cost_context``, also used by the campaign dashboard), the page context and its rendering
(``_page``, which every provider action uses to show its errors), and the small parsers of the
forms (whole numbers, amounts in cents, uploaded CSV text, the text of an import report).
"""
from __future__ import annotations

from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from annotation.models import Assignment, Campaign, ProviderJob
from annotation.providers import linkout, money
from annotation.providers.base import ProviderError, get_provider

MAX_UPLOAD = 20 * 1024 * 1024


def linkout_campaign(pk) -> Campaign:
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


def page(request, campaign, status=200, **extra):
    context = _provider_context(campaign)
    context.update(extra)
    if context["start_path"]:
        context["start_url"] = request.build_absolute_uri(context["start_path"])
        cfg = context["cfg"]
        context["start_url_full"] = (f"{context['start_url']}?{cfg['participant_param']}={{{{%PROLIFIC_PID%}}}}"
                                     f"&{cfg['study_param']}={{{{%STUDY_ID%}}}}&{cfg['session_param']}={{{{%SESSION_ID%}}}}")
    return render(request, "annotation/provider/page.html", context, status=status)


def int_param(value, default=0) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None if value not in (None, "") else default


def cents(value) -> int | None:
    """'1.50' (currency units) -> 150; None when not a number >= 0."""
    from decimal import Decimal, InvalidOperation

    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    if amount < 0 or amount != amount or amount > 100000:
        return None
    return int((amount * 100).quantize(Decimal("1")))


def report_text(report: dict) -> str:
    parts = [f"{report.get(k, 0)} {k}" for k in ("approved", "rejected", "confirmed", "expired", "unchanged")]
    return "Imported: " + ", ".join(parts) + (f"; {len(report['problems'])} problems" if report.get("problems") else "")


def upload_text(request) -> tuple[str | None, str]:
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
