"""The curator's campaign pages: list, create from a selection, the dashboard, members, gold and
training items, the per-worker table with blocking, tasks with their aggregated labels, and the
CSV export.

Views are thin, as in ``curation.views_pipeline``: they parse (``annotation.forms``), check the
role (every view is ``role_required(CURATOR)``; admins pass), call one service
(``annotation.services``, ``annotation.routing``) and render. Errors of a service come back as
``CampaignError(message, field)`` and go next to that field; the typed input stays in the form.
Every form posts without JavaScript; htmx only polls the progress and previews the instructions.
"""
from __future__ import annotations

import csv
import json
import logging
from collections import Counter, defaultdict

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, IntegerField, OuterRef, Prefetch, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST

from captionlab import roles
from captionlab.roles import role_required

from . import charts, routing, services
from .forms import GOLD_ROLES, BlockForm, CampaignForm, GoldForm, MembersForm
from .models import Aggregate, Campaign, GoldAnswer, Membership, Task, Vote
from .services import CampaignError

log = logging.getLogger(__name__)

CAMPAIGNS_PER_PAGE = 50
TASKS_PER_PAGE = 50
GOLD_PER_PAGE = 30
MAX_LIVE_VOTES = 50_000  # live figures (before the first aggregation) read at most this many votes
DEFAULT_PRECISION = 0.9
# The buttons a status offers: (target status, button label). Mirrors services.set_status.
STATUS_ACTIONS = {
    Campaign.Status.DRAFT: [(Campaign.Status.RUNNING, "Start")],
    Campaign.Status.RUNNING: [(Campaign.Status.PAUSED, "Pause"), (Campaign.Status.FINISHED, "Finish")],
    Campaign.Status.PAUSED: [(Campaign.Status.RUNNING, "Resume"), (Campaign.Status.FINISHED, "Finish")],
    Campaign.Status.FINISHED: [(Campaign.Status.RUNNING, "Reopen")],
}


def _campaign(pk) -> Campaign:
    return get_object_or_404(Campaign.objects.select_related("collection", "rate_campaign"), pk=pk)


def _count(qs) -> Subquery:
    """A correlated COUNT per campaign (no join fan-out between tasks and votes)."""
    rows = qs.order_by().values("campaign").annotate(n=Count("pk")).values("n")[:1]
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


# --- List and create -----------------------------------------------------------------------------


@role_required(roles.CURATOR)
@require_GET
def campaign_list(request):
    campaigns = Campaign.objects.select_related("collection").annotate(
        n_tasks=_count(Task.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL)),
        n_done=_count(Task.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL, status=Task.Status.DONE)),
        n_votes=_count(Vote.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL)),
    ).order_by("-created_at")
    status = request.GET.get("status", "")
    if status in Campaign.Status.values:
        campaigns = campaigns.filter(status=status)
    else:
        status = ""
    page = Paginator(campaigns, CAMPAIGNS_PER_PAGE).get_page(request.GET.get("page"))
    for c in page:
        c.percent = int(100 * c.n_done / c.n_tasks) if c.n_tasks else 0
    return render(request, "annotation/campaigns/list.html",
                  {"page": page, "status": status, "statuses": Campaign.Status.choices})


@role_required(roles.CURATOR)
def campaign_create(request):
    form = CampaignForm(request.POST if request.method == "POST" else None, initial={"kind": "fluency", "seed": 0})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = services.campaign_create(
                name=data["name"], kind=data["kind"], selection=form.selection(), user=request.user,
                members=list(data.get("members") or ()),
                status=Campaign.Status.RUNNING if data.get("start") else Campaign.Status.DRAFT, **form.settings())
        except CampaignError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            messages.success(request, f"Campaign “{campaign.name}” created with {campaign.tasks.count()} tasks.")
            return redirect(campaign)
    return render(request, "annotation/campaigns/create.html",
                  {"form": form, "kinds": form.kinds(), "run_steps": form.run_steps()},
                  status=400 if form.errors else 200)


@role_required(roles.CURATOR)
@require_POST
def instructions_preview(request):
    """The instructions as annotators will see them (htmx live preview of the create form)."""
    from .markdown import render_markdown

    text = request.POST.get("instructions", "")[:50_000]
    return render(request, "annotation/campaigns/_preview.html", {"html": render_markdown(text)})


# --- The dashboard -------------------------------------------------------------------------------


def _precision(request) -> tuple[float, str]:
    raw = request.GET.get("precision", "")
    if raw in ("", None):
        return DEFAULT_PRECISION, ""
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_PRECISION, f"“{raw}” is not a number: the precision is a share such as 0.9."
    if not 0.0 < value <= 1.0:
        return DEFAULT_PRECISION, "The precision is a share above 0 and at most 1, such as 0.9."
    return value, ""


def agreement_hint(alpha) -> tuple[str, str]:
    """Krippendorff's own reading of alpha: (level, sentence)."""
    if alpha is None:
        return "none", "Not enough items with two or more votes to measure agreement yet."
    if alpha >= 0.8:
        return "reliable", "α ≥ 0.8: reliable agreement; the labels can be used."
    if alpha >= 0.667:
        return "tentative", "0.667 ≤ α < 0.8: tentative; draw only tentative conclusions."
    return "unreliable", "α < 0.667: unreliable; check the instructions, gold items and workers."


def _progress_context(campaign: Campaign) -> dict:
    return {"campaign": campaign, "progress": services.progress(campaign),
            "polling": campaign.status == Campaign.Status.RUNNING}


def _live_distribution(campaign: Campaign) -> dict[str, int]:
    """Vote labels counted from the votes themselves, for a campaign not aggregated yet."""
    kind = campaign.kind_spec
    counts: Counter = Counter()
    values = (Vote.objects.filter(campaign=campaign, role=Task.Role.REAL).order_by("-pk")
              .values_list("value", flat=True)[:MAX_LIVE_VOTES])
    for value in values:
        for part, label in kind.parts(value).items():
            dim = part.split(":", 1)[1] if ":" in part else ""
            counts[f"{dim} {label}".strip() if dim and dim != "label" else str(label)] += 1
    return dict(counts)


def _ordered(kind, distribution: dict) -> list[tuple[str, int]]:
    """Labels in the kind's own order (fluent, not fluent, difficult), the rest after them."""
    order = {c.value: i for i, c in enumerate(kind.choices)}
    return sorted(((str(k), v) for k, v in distribution.items()),
                  key=lambda kv: (order.get(kv[0], len(order)), _num_key(kv[0])))


def _num_key(label: str):
    try:
        return (0, float(label.split()[-1]), label)
    except (ValueError, IndexError):
        return (1, 0.0, label)


def worker_rows(campaign: Campaign) -> list[dict]:
    """One row per member: live counts and block state from the memberships, and the quality
    figures of the last aggregation (reliability, agreement with consensus, median seconds)."""
    stats = {row.get("worker"): row for row in (campaign.stats or {}).get("workers", []) if isinstance(row, dict)}
    members = (Membership.objects.filter(campaign=campaign).select_related("worker", "worker__user")
               .order_by("worker__pk"))
    live_medians: dict[int, float] = {}
    if not stats:
        seconds = defaultdict(list)
        for worker_id, s in (Vote.objects.filter(campaign=campaign).order_by("-pk")
                             .values_list("worker_id", "seconds")[:MAX_LIVE_VOTES]):
            seconds[worker_id].append(s)
        live_medians = {w: charts.quantile(sorted(v), 0.5) for w, v in seconds.items()}
    rows = []
    for m in members:
        s = stats.get(m.worker_id, {})
        rows.append({
            "worker_id": m.worker_id, "name": str(m.worker), "votes": m.votes,
            "gold_seen": m.gold_seen, "gold_correct": m.gold_correct, "gold_accuracy": m.gold_accuracy,
            "reliability": s.get("reliability", m.reliability),
            "agreement": s.get("agreement_with_consensus"),
            "median_seconds": s.get("median_seconds", live_medians.get(m.worker_id)),
            "blocked": m.blocked or m.worker.blocked, "blocked_reason": m.blocked_reason,
            "globally_blocked": m.worker.blocked,
            "training_done": m.training_done_at is not None, "qualified": m.qualified,
        })
    return rows


def _filter_vs_human(campaign: Campaign, precision: float) -> list[dict]:
    from .filter_vs_human import filter_vs_human

    comparisons = filter_vs_human(campaign, precision=precision) or []
    for c in comparisons:  # the table's columns: every human label any outcome row has
        labels: list = []
        for row in (c.get("matrix") or {}).values():
            labels.extend(str(k) for k in row if str(k) not in labels)
        c["columns"] = labels
        c["rows"] = [(outcome, [row.get(label, 0) for label in labels], sum(row.values()))
                     for outcome, row in (c.get("matrix") or {}).items()]
    return comparisons


def _label_chart(kind, distributions: dict):
    """The aggregated label distributions of every method on one grouped chart (None when none).
    Categorical methods share the kind's labels; a method with labels of its own (numeric means,
    text choices) would crowd the chart and is left to the tasks page."""
    series = [(method, dist) for method, dist in distributions.items() if isinstance(dist, dict) and dist]
    if not series:
        return None
    labels = [label for label, _ in _ordered(kind, Counter({str(k): 0 for _, d in series for k in d}))]
    return charts.grouped_bar_chart(labels[:24], [(m, {str(k): v for k, v in d.items()}) for m, d in series],
                                    title="Aggregated labels per method", x_label="aggregated label",
                                    y_label="items", cls="label-chart")


def dashboard_context(campaign: Campaign, precision: float) -> dict:
    stats = campaign.stats or {}
    kind = campaign.kind_spec
    votes = Vote.objects.filter(campaign=campaign, role=Task.Role.REAL)
    seconds = charts.seconds_summary(votes)
    agreement = stats.get("agreement") or {}
    level, hint = agreement_hint(agreement.get("alpha"))
    distribution = stats.get("vote_distribution") or _live_distribution(campaign)
    label_chart = _label_chart(kind, stats.get("label_distribution") or {})
    computed_at = parse_datetime(stats["computed_at"]) if stats.get("computed_at") else None
    progress = services.progress(campaign)
    return {
        "campaign": campaign, "kind": kind, "stats": stats, "progress": progress,
        "polling": campaign.status == Campaign.Status.RUNNING,
        "actions": STATUS_ACTIONS.get(campaign.status, []),
        "throughput_svg": charts.throughput_svg(charts.throughput(votes)),
        "seconds": seconds, "seconds_svg": charts.seconds_svg(seconds),
        "agreement": agreement, "agreement_level": level, "agreement_hint": hint,
        "per_part": sorted((agreement.get("per_part") or {}).items()),
        "vote_chart": charts.bar_chart(_ordered(kind, distribution), title="Votes per label",
                                       x_label="vote label", y_label="votes", cls="vote-chart"),
        "distribution_live": not stats.get("vote_distribution"),
        "label_chart": label_chart,
        "seed": stats.get("seed_figures") or {},
        "workers": worker_rows(campaign),
        "computed_at": computed_at,
        "stale": bool(computed_at) and stats.get("n_votes") != progress["votes"],
        "precision": precision,
        "comparisons": _filter_vs_human(campaign, precision),
        "instructions_html": _instructions(campaign),
        "members_count": Membership.objects.filter(campaign=campaign).count(),
        "gold_counts": dict(campaign.tasks.exclude(role=Task.Role.REAL).order_by().values_list("role")
                            .annotate(n=Count("pk")).values_list("role", "n")),
        **_cost_context(campaign),
        **_loop_context(campaign),
    }


def _loop_context(campaign: Campaign) -> dict:
    """The "Learning loop" card (modeling.views_loop): the campaign's loop, or the form to start one."""
    from modeling.views_loop import campaign_card_context

    return campaign_card_context(campaign)


def _cost_context(campaign: Campaign) -> dict:
    """The cost panel (money.summary) and the crowd provider page's link."""
    from .views_linkout import cost_context

    return cost_context(campaign)


def _instructions(campaign: Campaign):
    if not campaign.instructions:
        return ""
    from .markdown import render_markdown

    return render_markdown(campaign.instructions)


@role_required(roles.CURATOR)
@require_GET
def campaign_detail(request, pk):
    campaign = _campaign(pk)
    precision, precision_error = _precision(request)
    context = dashboard_context(campaign, precision)
    context["precision_error"] = precision_error
    context["precision_text"] = request.GET.get("precision", "") if precision_error else precision
    return render(request, "annotation/campaigns/detail.html", context, status=400 if precision_error else 200)


@role_required(roles.CURATOR)
@require_GET
def campaign_progress(request, pk):
    """The progress card alone, polled every 5 s while the campaign runs."""
    return render(request, "annotation/campaigns/_progress.html", _progress_context(_campaign(pk)))


@role_required(roles.CURATOR)
@require_POST
def campaign_status(request, pk):
    campaign = _campaign(pk)
    status = request.POST.get("status", "")
    try:
        services.set_status(campaign, status)
    except CampaignError as error:  # the dashboard again, with the reason next to the buttons
        precision, _ = _precision(request)
        context = dashboard_context(campaign, precision) | {"status_error": error.message,
                                                             "precision_text": precision}
        return render(request, "annotation/campaigns/detail.html", context, status=409)
    messages.success(request, f"Campaign “{campaign.name}” is now {campaign.get_status_display().lower()}.")
    return redirect(campaign)


@role_required(roles.CURATOR)
@require_POST
def campaign_aggregate(request, pk):
    """Recompute now: queue the aggregation (inline without a broker)."""
    from .tasks import aggregate_campaign

    campaign = _campaign(pk)
    try:
        aggregate_campaign.delay(campaign.pk)
    except Exception as exc:  # noqa: BLE001 - the curator gets the reason, the log the traceback
        log.exception("aggregation of campaign %s failed", campaign.pk)
        messages.error(request, f"The aggregation failed: {exc}")
    else:
        messages.success(request, "Aggregation queued: the figures below update when it finishes.")
    return redirect(campaign)


# --- Members, gold, workers ----------------------------------------------------------------------


@role_required(roles.CURATOR)
def campaign_members(request, pk):
    campaign = _campaign(pk)
    form = MembersForm(request.POST if request.method == "POST" else None, campaign=campaign)
    if request.method == "POST" and form.is_valid():
        added = services.members_set(campaign, list(form.cleaned_data["members"]))
        messages.success(request, f"{added} annotator{'s' if added != 1 else ''} added.")
        return redirect("campaign-members", campaign.pk)
    members = (Membership.objects.filter(campaign=campaign).select_related("worker", "worker__user")
               .order_by("worker__pk"))
    return render(request, "annotation/campaigns/members.html",
                  {"campaign": campaign, "form": form, "members": members}, status=400 if form.errors else 200)


def _gold_value(kind, raw: str):
    """The expected answer as the kind takes it: JSON for candidate kinds, the text otherwise."""
    if kind.target == "candidates":
        try:
            return json.loads(raw or "")
        except ValueError:
            raise CampaignError('The expected answer must be JSON such as {"ratings": {"<caption id>": '
                                '{...}}}.', field="value") from None
    return raw


def _gold_rows(campaign: Campaign, page) -> list[dict]:
    kind = campaign.kind_spec
    rows = []
    for task in page:
        gold = getattr(task, "gold_answer", None)
        value = ""
        if gold is not None:
            if kind.target == "candidates":
                value = json.dumps(gold.value)
            elif isinstance(gold.value, dict):
                value = next(iter(gold.value.values()), "")
            else:
                value = gold.value
        elif kind.target == "candidates":
            value = json.dumps({"ratings": {str(c): {d: "" for d in kind.dimensions} for c in task.candidates}})
        rows.append({"task": task, "gold": gold, "value": "" if value is None else str(value),
                     "role": task.role if task.role != Task.Role.REAL else Task.Role.GOLD,
                     "feedback": gold.feedback if gold else "", "tolerance": gold.tolerance if gold else "",
                     "error": ""})
    return rows


@role_required(roles.CURATOR)
def campaign_gold(request, pk):
    """Make tasks gold, training or qualification items with their expected answer."""
    campaign = _campaign(pk)
    kind = campaign.kind_spec
    role_filter = request.GET.get("role", "")
    if role_filter not in Task.Role.values:
        role_filter = ""
    tasks = (campaign.tasks.select_related("image", "caption").order_by("position", "pk")
             .annotate(n_votes=Count("votes")))
    if role_filter:
        tasks = tasks.filter(role=role_filter)
    error_task, error, status = None, "", 200
    posted = {}
    if request.method == "POST":
        form = GoldForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            task = get_object_or_404(Task, pk=data["task"], campaign=campaign)
            try:
                services.set_gold(task, role=data["role"], value=_gold_value(kind, data["value"]),
                                  feedback=data["feedback"], tolerance=data.get("tolerance") or 0.0)
            except CampaignError as exc:
                error_task, error, status = task.pk, exc.message, 400
            else:
                messages.success(request, f"Task {task.pk} is now a {task.get_role_display().lower()}.")
                return redirect(request.get_full_path())
        else:
            error_task, status = request.POST.get("task"), 400
            error = " ".join(e for errs in form.errors.values() for e in errs)
        posted = {k: request.POST.get(k, "") for k in ("role", "value", "feedback", "tolerance")}
    page = Paginator(tasks, GOLD_PER_PAGE).get_page(request.GET.get("page"))
    golds = {g.task_id: g for g in GoldAnswer.objects.filter(task__in=[t.pk for t in page])}
    for task in page:
        task.gold_answer = golds.get(task.pk)
    rows = _gold_rows(campaign, page)
    for row in rows:
        if error_task is not None and str(row["task"].pk) == str(error_task):
            row.update(posted, error=error)
    if error and not any(row["error"] for row in rows):
        messages.error(request, error)
    counts = dict(campaign.tasks.order_by().values_list("role").annotate(n=Count("pk")).values_list("role", "n"))
    return render(request, "annotation/campaigns/gold.html", {
        "campaign": campaign, "kind": kind, "page": page, "rows": rows, "roles": GOLD_ROLES,
        "role_filter": role_filter, "role_tabs": [("", "All", sum(counts.values()))]
        + [(v, label, counts.get(v, 0)) for v, label in Task.Role.choices],
    }, status=status)


@role_required(roles.CURATOR)
def campaign_workers(request, pk):
    """The per-worker table; POST blocks or unblocks one worker with a reason."""
    campaign = _campaign(pk)
    status = 200
    if request.method == "POST":
        form = BlockForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            membership = Membership.objects.filter(campaign=campaign, worker_id=data["worker"]).select_related(
                "worker", "worker__user").first()
            if membership is None:
                raise Http404("That worker is not in this campaign.")
            blocked = data["action"] == "block"
            reason = data.get("reason") or ""
            if blocked and not reason.strip():
                messages.error(request, "Give a reason to block a worker: it is kept with the block.")
                status = 400
            else:
                reopened = routing.block_worker(campaign, membership.worker, reason=reason.strip(), blocked=blocked)
                from .tasks import schedule_aggregation

                schedule_aggregation(campaign.pk)
                if blocked:
                    plural = "s" if reopened != 1 else ""
                    messages.success(request, f"Blocked {membership.worker}: {reopened} task{plural} reopened.")
                else:
                    messages.success(request, f"Unblocked {membership.worker}: their votes count again.")
                return redirect("campaign-workers", campaign.pk)
        else:
            messages.error(request, "Choose a worker and block or unblock.")
            status = 400
    return render(request, "annotation/campaigns/workers.html",
                  {"campaign": campaign, "workers": worker_rows(campaign), "stats": campaign.stats or {}},
                  status=status)


# --- Tasks and export ----------------------------------------------------------------------------


@role_required(roles.CURATOR)
@require_GET
def campaign_tasks(request, pk):
    campaign = _campaign(pk)
    role = request.GET.get("role", "")
    state = request.GET.get("status", "")
    tasks = (campaign.tasks.select_related("image", "caption").order_by("position", "pk")
             .annotate(n_votes=Count("votes"))
             .prefetch_related(Prefetch("aggregates", queryset=Aggregate.objects.order_by("part", "method"))))
    if role in Task.Role.values:
        tasks = tasks.filter(role=role)
    else:
        role = ""
    if state in Task.Status.values:
        tasks = tasks.filter(status=state)
    else:
        state = ""
    page = Paginator(tasks, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    for task in page:
        aggregates = list(task.aggregates.all())
        task.main_aggregates = [a for a in aggregates if a.part == ""]
        task.part_aggregates = [a for a in aggregates if a.part != ""][:12]
        task.more_parts = max(len([a for a in aggregates if a.part != ""]) - 12, 0)
    return render(request, "annotation/campaigns/tasks.html", {
        "campaign": campaign, "page": page, "role": role, "state": state,
        "roles": Task.Role.choices, "statuses": Task.Status.choices})


def _cell(value) -> str:
    """A CSV cell a spreadsheet will not run: text starting with = + - @ gets a leading quote."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = str(value)
    if text[:1] in ("=", "+", "-", "@", "\t", "\r") and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Echo:
    def write(self, value):
        return value


def _vote_rows(campaign: Campaign):
    kind = campaign.kind_spec
    blocked = set(Membership.objects.filter(campaign=campaign, blocked=True).values_list("worker_id", flat=True))
    yield ["vote_id", "task_id", "role", "image_id", "image_external_id", "caption_id", "caption_text", "worker_id",
           "worker", "value", "label", "correct", "seconds", "created_at", "worker_blocked"]
    votes = (Vote.objects.filter(campaign=campaign).select_related("task__image", "task__caption", "worker__user")
             .order_by("pk"))
    for v in votes.iterator(chunk_size=2000):
        label = kind.label_of(v.value)
        if label is None and isinstance(v.value, dict) and "text" in v.value:
            label = v.value["text"]
        yield [v.pk, v.task_id, v.role, v.task.image_id, v.task.image.external_id, v.task.caption_id,
               v.task.caption.text if v.task.caption_id else "", v.worker_id, str(v.worker), v.value, label,
               v.correct, round(v.seconds, 3), v.created_at.isoformat(), v.worker_id in blocked]


def _aggregate_rows(campaign: Campaign):
    yield ["task_id", "image_id", "caption_id", "caption_text", "part", "method", "label", "confidence", "n_votes",
           "updated_at"]
    aggregates = (Aggregate.objects.filter(task__campaign=campaign).select_related("task__caption")
                  .order_by("task_id", "part", "method"))
    for a in aggregates.iterator(chunk_size=2000):
        yield [a.task_id, a.task.image_id, a.task.caption_id, a.task.caption.text if a.task.caption_id else "",
               a.part, a.method, a.label, a.confidence, a.n_votes, a.updated_at.isoformat()]


@role_required(roles.CURATOR)
@require_GET
def campaign_export(request, pk):
    """CSV of the votes (``?table=votes``, the default) or of the aggregated labels
    (``?table=aggregates``), streamed so a large campaign does not sit in memory."""
    campaign = _campaign(pk)
    table = request.GET.get("table", "votes")
    if table not in ("votes", "aggregates"):
        return HttpResponse("table must be votes or aggregates.", status=400, content_type="text/plain")
    rows = _vote_rows(campaign) if table == "votes" else _aggregate_rows(campaign)
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse((writer.writerow([_cell(c) for c in row]) for row in rows),
                                     content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{table}.csv"'
    return response


__all__ = ["campaign_list", "campaign_create", "campaign_detail", "campaign_progress", "campaign_status",
           "campaign_aggregate", "campaign_members", "campaign_gold", "campaign_workers", "campaign_tasks",
           "campaign_export", "instructions_preview", "worker_rows", "agreement_hint", "dashboard_context"]
