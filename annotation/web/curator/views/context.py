"""The campaign dashboard's figures: ``dashboard_context`` and the helpers that build it (progress,
throughput, agreement and its reading, vote and label charts, the per-worker rows, filter vs human,
cost cards, and the cards the apps above register in ``annotation.campaign_cards``, such as modeling's
learning loop). No views here: the dashboard views and ``modeling.views_loop`` call it."""
from __future__ import annotations

from collections import Counter, defaultdict

from django.db.models import Count
from django.utils.dateparse import parse_datetime

from annotation import charts, services
from annotation.campaign_cards import cards_context
from annotation.models import Campaign, Membership, Task, Vote

MAX_LIVE_VOTES = 50_000  # live figures (before the first aggregation) read at most this many votes
DEFAULT_PRECISION = 0.9
# The buttons a status offers: (target status, button label). Mirrors services.set_status.
STATUS_ACTIONS = {
    Campaign.Status.DRAFT: [(Campaign.Status.RUNNING, "Start")],
    Campaign.Status.RUNNING: [(Campaign.Status.PAUSED, "Pause"), (Campaign.Status.FINISHED, "Finish")],
    Campaign.Status.PAUSED: [(Campaign.Status.RUNNING, "Resume"), (Campaign.Status.FINISHED, "Finish")],
    Campaign.Status.FINISHED: [(Campaign.Status.RUNNING, "Reopen")],
}


def agreement_hint(alpha) -> tuple[str, str]:
    """Krippendorff's own reading of alpha: (level, sentence)."""
    if alpha is None:
        return "none", "Not enough items with two or more votes to measure agreement yet."
    if alpha >= 0.8:
        return "reliable", "α ≥ 0.8: reliable agreement; the labels can be used."
    if alpha >= 0.667:
        return "tentative", "0.667 ≤ α < 0.8: tentative; draw only tentative conclusions."
    return "unreliable", "α < 0.667: unreliable; check the instructions, gold items and workers."


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
            "alpha": s.get("alpha"),
            "median_seconds": s.get("median_seconds", live_medians.get(m.worker_id)),
            "blocked": m.blocked or m.worker.blocked, "blocked_reason": m.blocked_reason,
            "globally_blocked": m.worker.blocked,
            "training_done": m.training_done_at is not None, "qualified": m.qualified,
        })
    return rows


def _filter_vs_human(campaign: Campaign, precision: float) -> list[dict]:
    from annotation.filter_vs_human import filter_vs_human

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
        **cards_context(campaign),  # the apps above annotation: modeling's learning-loop card
    }


def _cost_context(campaign: Campaign) -> dict:
    """The cost panel (money.summary) and the crowd provider page's link."""
    from annotation.web.crowd.linkout import cost_context

    return cost_context(campaign)


def _instructions(campaign: Campaign):
    if not campaign.instructions:
        return ""
    from annotation.markdown import render_markdown

    return render_markdown(campaign.instructions)


