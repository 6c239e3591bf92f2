"""The full pass: every per-task rule over every task, the model-based methods, agreement and the
per-worker figures; it also resets the state the incremental passes continue from."""
from __future__ import annotations

import logging

import pandas as pd
from django.db.models import Count, Q
from django.utils import timezone

from ..models import Aggregate, Campaign, Membership, Task, Worker
from .agreement import krippendorff_alpha, worker_alpha
from .frames import Results, blocked_workers, counted_votes, label_key, load_votes
from .methods import MODEL_METHODS, BradleyTerry, Categorical, Rover, run_fits
from .per_task import per_task_rows, tie_break_rule
from .store import campaign_lock, replace_rows, set_stats, write_reliability
from .tally import contributions, figures

log = logging.getLogger(__name__)

STATE_VERSION = 1


def vote_counts(campaign: Campaign, blocked: set[int]) -> dict:
    """n_votes (every counted vote on a real task), n_votes_used and n_votes_excluded (blocked
    workers' votes), in one counting query."""
    counts = counted_votes(campaign).aggregate(n=Count("pk"), excluded=Count("pk", filter=Q(worker_id__in=blocked)))
    return {"n_votes": counts["n"], "n_votes_used": counts["n"] - counts["excluded"],
            "n_votes_excluded": counts["excluded"]}


def run_models(campaign, kind, votes: pd.DataFrame, all_parts, results: Results) -> dict:
    """Dawid-Skene, GLAD, MACE, Bradley-Terry and ROVER (rows added to ``results``), agreement and the
    per-worker figures. Needs the per-task rows in ``results`` already (majority fallbacks)."""
    metric = None if kind.written else kind.scale
    agreement = {"alpha": None, "metric": metric, "per_part": {}, "n_items": 0}
    reliability: dict[int, list[float]] = {}
    consensus_frames = []
    alphas: dict = {}
    if kind.written:
        run_fits([Rover(votes[~votes["blocked"]])], results)
    if all_parts is not None:
        parts = all_parts[~all_parts["blocked"]]
        majority = {(t, p): (v[0], v[1]) for (t, p, m), v in results.rows.items() if m == "majority"}
        if not parts.empty:
            # Every dimension's fits in one process (methods.fit): crowd-kit is imported once a pass.
            groups = list(parts.groupby("dim"))
            models = [Categorical(group, dim, majority) for dim, group in groups]
            if kind.target == "candidates" and kind.numeric:
                models += [BradleyTerry(dim, group) for dim, group in groups]
            for out in run_fits(models, results)[:len(groups)]:
                for worker, value in out["reliability"].items():
                    reliability.setdefault(worker, []).append(value)
                keys = out["keys"].assign(consensus=out["consensus"].reindex(out["keys"]["key"]).to_numpy())
                consensus_frames.append(keys[["task", "part", "consensus"]])
        alpha, n_items = krippendorff_alpha(parts, metric)
        agreement.update(alpha=alpha, n_items=n_items)
        if kind.target == "candidates":
            agreement["per_part"] = {dim: krippendorff_alpha(group, metric)[0] for dim, group in parts.groupby("dim")}
        alphas = worker_alpha(all_parts, metric, others=parts)
    workers = worker_figures(campaign, votes, all_parts, consensus_frames, reliability, alphas)
    labels: dict[str, dict] = {}
    for (task, part, method), (label, *_rest) in results.rows.items():
        if method in ("dawid_skene", "glad", "mace"):
            key = label_key(kind, part, label)
            labels.setdefault(method, {})[key] = labels.setdefault(method, {}).get(key, 0) + 1
    return {"agreement": agreement, "workers": workers, "labels": labels}


def aggregate_campaign(campaign_id: int) -> dict:
    """Recompute every aggregate and figure of a campaign; returns the new ``Campaign.stats``
    ({} when the campaign no longer exists: a queued run may outlive it)."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        log.info("campaign %s is gone; nothing to aggregate", campaign_id)
        return {}
    with campaign_lock(campaign.pk):
        campaign.refresh_from_db(fields=["provider_config", "votes_per_item"])
        started = timezone.now()  # votes changed from here on are the next incremental pass's
        kind = campaign.kind_spec
        blocked = blocked_workers(campaign)
        votes = load_votes(campaign)
        rule, tie_note = tie_break_rule(campaign)
        results = Results()
        if tie_note:
            results.note(tie_note)
        all_parts = per_task_rows(campaign, kind, votes, results, rule)
        tally = contributions(kind, results.rows)
        models = run_models(campaign, kind, votes, all_parts, results)
        stats = {
            "computed_at": started.isoformat(),
            "models_computed_at": started.isoformat(),
            **vote_counts_from_frame(votes),
            "n_tasks": Task.objects.filter(campaign=campaign, role=Task.Role.REAL).count(),
            **figures(kind, tally, rule),
            "agreement": models["agreement"],
            "workers": models["workers"],
            "methods": sorted(results.methods),
            "notes": results.notes,
        }
        stats["label_distribution"] = dict(sorted({**stats["label_distribution"], **models["labels"]}.items()))
        stats["incremental"] = {"version": STATE_VERSION, "watermark": started.isoformat(),
                                "blocked": sorted(blocked), "tally": tally, "pending_votes": 0,
                                "models_at": started.isoformat()}
        replace_rows(results.rows, Aggregate.objects.filter(task__campaign=campaign))
        write_reliability(campaign, models["workers"])
        set_stats(campaign.pk, stats)
    return stats


def vote_counts_from_frame(votes: pd.DataFrame) -> dict:
    return {"n_votes": int(len(votes)), "n_votes_used": int((~votes["blocked"]).sum()),
            "n_votes_excluded": int(votes["blocked"].sum())}


def worker_figures(campaign, votes, all_parts, consensus_frames, reliability, alphas) -> list[dict]:
    """Per worker: votes, gold accuracy, Dawid-Skene reliability, Krippendorff alpha with the rest
    (``agreement.worker_alpha``), agreement with the consensus (the share of their labels equal
    to the Dawid-Skene label, or the majority where DS fell back; ties left out; blocked workers
    are compared with the consensus of the others), median seconds, blocked."""
    members = {w: {"gold_seen": gs, "gold_correct": gc, "blocked": mb or wb, "name": _name(u, p, e)}
               for w, gs, gc, mb, wb, u, p, e in Membership.objects.filter(campaign=campaign).values_list(
                   "worker_id", "gold_seen", "gold_correct", "blocked", "worker__blocked", "worker__user__username",
                   "worker__provider", "worker__external_id")}
    strangers = set(votes["worker"].unique().tolist()) - set(members)
    for w, wb, u, p, e in Worker.objects.filter(pk__in=strangers).values_list(
            "pk", "blocked", "user__username", "provider", "external_id"):
        members[w] = {"gold_seen": 0, "gold_correct": 0, "blocked": wb, "name": _name(u, p, e)}
    n_votes = votes.groupby("worker").size().to_dict() if len(votes) else {}
    median = votes.groupby("worker")["seconds"].median().to_dict() if len(votes) else {}
    agree: dict = {}
    if consensus_frames and all_parts is not None and not all_parts.empty:
        consensus = pd.concat(consensus_frames)
        consensus = consensus[consensus["consensus"].notna()]
        joined = all_parts.merge(consensus, on=["task", "part"], how="inner")
        if not joined.empty:
            joined["same"] = joined["cat"].astype(str) == joined["consensus"].astype(str)
            agree = joined.groupby("worker")["same"].mean().to_dict()
    out = []
    for w in sorted(members):
        m = members[w]
        rel = reliability.get(w)
        a = alphas.get(w) or {}
        out.append({
            "worker": int(w), "name": m["name"], "votes": int(n_votes.get(w, 0)),
            "gold_seen": m["gold_seen"], "gold_correct": m["gold_correct"],
            "gold_accuracy": round(m["gold_correct"] / m["gold_seen"], 4) if m["gold_seen"] else None,
            "reliability": round(sum(rel) / len(rel), 4) if rel and not m["blocked"] else None,
            "alpha": a.get("alpha"), "alpha_pairs": a.get("pairs", 0),
            "agreement_with_consensus": round(float(agree[w]), 4) if w in agree else None,
            "median_seconds": round(float(median[w]), 3) if w in median and median[w] == median[w] else None,
            "blocked": bool(m["blocked"]),
        })
    return out


def _name(username, provider, external_id) -> str:
    return username or f"{provider}:{external_id}"


__all__ = ["aggregate_campaign", "run_models", "vote_counts", "worker_figures", "MODEL_METHODS", "STATE_VERSION"]
