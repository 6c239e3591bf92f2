"""Campaign aggregation: consensus labels, agreement and per-worker quality figures.

``aggregate_campaign(campaign_id)`` reads every vote on the campaign's REAL tasks in one query,
drops the votes of blocked workers (``Membership.blocked`` or ``Worker.blocked``), splits each vote
into its parts (``kind.parts``: one part for caption kinds, one per candidate and dimension for
candidate kinds) and runs, per dimension:

- categorical labels (and the good/bad side of 50 for sliders): crowd-kit's MajorityVote,
  DawidSkene, GLAD and MACE (the last two only up to ``ANNOTATION_SLOW_METHODS_MAX_VOTES`` votes
  per dimension: they are iterative optimisers that cost seconds per few thousand votes);
- numeric labels (sliders, 1-5 ratings): "mean" with the population standard deviation;
- 1-5 ratings of candidates shown together: Bradley-Terry over the pairs each vote implies
  (the higher rating wins, ties are skipped);
- written captions: ROVER, with the written caption of highest mean token similarity to the
  others as the representative one;
- seed rules: the "consistent" rule of seed 004 for fluency and the 1+/2+/3+ GOOD shares of
  seed 002 for quality.

Results are upserted as ``Aggregate`` rows (stale ones deleted), the figures go to
``Campaign.stats`` (schema in DESIGN / the dashboard) and Dawid-Skene reliabilities to
``Membership.reliability``. Everything is vectorised with pandas so ~100k votes take seconds.
"""
from __future__ import annotations

import json
import logging
import math
import warnings
from collections import Counter

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .kinds import CandidatesKind, SliderKind, WriteKind
from .models import Assignment, Aggregate, Campaign, Membership, Task, Vote, Worker

log = logging.getLogger(__name__)

CATEGORICAL_METHODS = ("majority", "dawid_skene", "glad", "mace")
BATCH = 2000


def _slow_limit() -> int:
    return int(getattr(settings, "ANNOTATION_SLOW_METHODS_MAX_VOTES", 20000))


# --- loading --------------------------------------------------------------------------------------

def load_votes(campaign: Campaign) -> pd.DataFrame:
    """One query: the campaign's counted votes on real tasks with the worker's block state.
    Left out: quarantined votes (their external assignment is not confirmed by the provider) and
    the votes of assignments the requester rejected (judged bad work, so they are not evidence)."""
    blocked_members = set(Membership.objects.filter(campaign=campaign, blocked=True)
                          .values_list("worker_id", flat=True))
    rows = list(Vote.objects.filter(campaign=campaign, role=Task.Role.REAL, task__role=Task.Role.REAL, quarantined=False)
                .exclude(assignment__state=Assignment.State.REJECTED)
                .order_by("pk")
                .values_list("pk", "task_id", "worker_id", "value", "seconds", "caption_id", "worker__blocked"))
    frame = pd.DataFrame(rows, columns=["vote", "task", "worker", "value", "seconds", "caption", "worker_blocked"])
    frame["blocked"] = (frame["worker_blocked"].astype(bool) | frame["worker"].isin(blocked_members)).astype(bool)
    return frame.drop(columns=["worker_blocked"])


def dimension_of(kind, part: str) -> str:
    """The dimension a part belongs to: "<caption id>:<dimension>" -> dimension; "" -> the kind's."""
    if ":" in part:
        return part.split(":", 1)[1]
    return "score" if isinstance(kind, SliderKind) else "label"


def explode_parts(kind, votes: pd.DataFrame) -> pd.DataFrame:
    """One row per (vote, part): task, worker, part, dim, label (the raw value) and cat (the
    categorical label the discrete methods use: the label itself, or a slider's good/bad side)."""
    records = []
    for vote, task, worker, value, seconds, blocked in votes[
            ["vote", "task", "worker", "value", "seconds", "blocked"]].itertuples(index=False, name=None):
        for part, label in kind.parts(value).items():
            if label is not None:
                records.append((vote, task, worker, part, label, seconds, blocked))
    parts = pd.DataFrame(records, columns=["vote", "task", "worker", "part", "label", "seconds", "blocked"])
    parts["blocked"] = parts["blocked"].astype(bool)
    parts["dim"] = pd.Series([dimension_of(kind, p) for p in parts["part"]], index=parts.index, dtype=object)
    if isinstance(kind, SliderKind):
        middle = (kind.minimum + kind.maximum) / 2
        parts["cat"] = np.where(parts["label"].astype(float) >= middle, "good", "bad")
    else:
        parts["cat"] = parts["label"]
    return parts


def _py(value):
    """A JSON-safe Python value from numpy/pandas scalars."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# --- categorical methods --------------------------------------------------------------------------

class Results:
    """Aggregate rows being built: {(task, part, method): (label, confidence, n_votes, details)}."""

    def __init__(self):
        self.rows: dict[tuple, tuple] = {}
        self.notes: list[str] = []
        self.methods: set[str] = set()

    def add(self, task, part, method, label, confidence=None, n_votes=0, details=None):
        conf = None if confidence is None else round(float(confidence), 6)
        self.rows[(int(task), part, method)] = (_py(label), conf, int(n_votes), details or {})
        self.methods.add(method)

    def note(self, text: str):
        if text not in self.notes:
            self.notes.append(text)


def _crowd_frame(parts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """crowd-kit input (worker, task, label) with task = an integer key per (task, part)."""
    keys = parts[["task", "part"]].drop_duplicates().reset_index(drop=True)
    keys["key"] = np.arange(len(keys))
    merged = parts.merge(keys, on=["task", "part"], how="left")
    data = pd.DataFrame({"worker": merged["worker"].to_numpy(), "task": merged["key"].to_numpy(),
                         "label": merged["cat"].to_numpy()})
    return data, keys


def _best(probas: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Most probable label, its probability, and whether another label ties it."""
    values = probas.to_numpy(dtype=float)
    best = values.max(axis=1)
    ties = (np.isclose(values, best[:, None])).sum(axis=1) > 1
    labels = probas.columns.to_numpy()[values.argmax(axis=1)]
    return (pd.Series(labels, index=probas.index), pd.Series(best, index=probas.index),
            pd.Series(ties, index=probas.index))


def categorical(parts: pd.DataFrame, results: Results, dim: str) -> dict:
    """Majority, Dawid-Skene, GLAD and MACE on one dimension. Returns {"consensus": Series by key,
    "reliability": {worker: float}, "keys": DataFrame} for the per-worker figures."""
    from crowdkit.aggregation import GLAD, MACE, DawidSkene, MajorityVote

    data, keys = _crowd_frame(parts)
    index = keys["key"].to_numpy()
    tasks, part_names = keys["task"].to_numpy(), keys["part"].to_numpy()
    n_votes = data.groupby("task").size().reindex(index).to_numpy()

    def emit(method, labels, confidences, details=None):
        labels = labels.reindex(index).to_numpy()
        confidences = confidences.reindex(index).to_numpy()
        for i in range(len(index)):
            results.add(tasks[i], part_names[i], method, labels[i], confidences[i], n_votes[i],
                        details[i] if details is not None else None)

    counts = data.groupby(["task", "label"]).size()
    per_task_counts: dict[int, dict] = {}
    for (key, label), n in counts.items():
        per_task_counts.setdefault(int(key), {})[str(_py(label))] = int(n)
    mv_label, mv_conf, mv_tie = _best(MajorityVote().fit_predict_proba(data))
    ties = mv_tie.reindex(index).to_numpy()
    emit("majority", mv_label, mv_conf,
         [{"votes": per_task_counts.get(int(k), {}), "tie": bool(t)} for k, t in zip(index, ties)])

    def fallback(method: str, reason: str):
        results.note(f"{method} ({dim}): {reason}; majority vote used instead")
        emit(method, mv_label, mv_conf, [{"fallback": "majority", "reason": reason}] * len(index))

    n_workers = data["worker"].nunique()
    n_labels = data["label"].nunique()
    degenerate = ("only one worker" if n_workers < 2 else
                  "only one label was given" if n_labels < 2 else None)
    consensus = mv_label
    reliability: dict = {}
    if degenerate:
        fallback("dawid_skene", degenerate)
    else:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                # EM on large sets oscillates around 1e-4 of the (per-item) loss instead of
                # meeting the tolerance; 40 rounds give the same labels within a fraction of a
                # percent at 100k votes in a quarter of the time.
                ds = DawidSkene(n_iter=100 if len(data) <= _slow_limit() else 40, tol=1e-5).fit(data)
            ds_label, ds_conf, _ = _best(ds.probas_)
            emit("dawid_skene", ds_label, ds_conf)
            consensus = ds_label
            reliability = ds_reliability(ds.errors_, ds.priors_)
        except Exception as exc:  # a numerical failure must not lose the other figures
            log.exception("Dawid-Skene failed")
            fallback("dawid_skene", f"failed: {exc}")

    if degenerate:
        results.note(f"glad, mace ({dim}): skipped, {degenerate}")
    elif len(data) > _slow_limit():
        results.note(f"glad, mace ({dim}): skipped, {len(data)} votes is over the limit of {_slow_limit()}")
    else:
        for method, model in (("glad", lambda: GLAD(n_iter=20)),
                              ("mace", lambda: MACE(n_iter=20, n_restarts=2, random_state=0))):
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    label, conf, _ = _best(model().fit_predict_proba(data))
                emit(method, label, conf)
            except Exception as exc:
                log.exception("%s failed", method)
                results.note(f"{method} ({dim}): failed: {exc}")
    return {"consensus": consensus, "keys": keys, "reliability": reliability}


def ds_reliability(errors: pd.DataFrame, priors: pd.Series) -> dict:
    """A worker's expected accuracy under Dawid-Skene: the diagonal of their confusion matrix
    (P(says c | truth c)) weighted by the class priors. Weighting by the priors keeps a rare class
    that a worker never used from dragging the figure to zero the way a plain mean would."""
    stacked = errors.stack()
    stacked.index = stacked.index.set_names(["worker", "observed", "truth"])
    frame = stacked.reset_index(name="p")
    diagonal = frame[frame["observed"] == frame["truth"]].copy()
    diagonal["w"] = diagonal["truth"].map(priors).astype(float)
    diagonal["wp"] = diagonal["p"].astype(float) * diagonal["w"]
    total = float(priors.sum()) or 1.0
    return {int(w): round(float(v) / total, 6) for w, v in diagonal.groupby("worker")["wp"].sum().items()}


# --- numeric methods ------------------------------------------------------------------------------

def means(parts: pd.DataFrame, results: Results) -> None:
    """Mean and population standard deviation per task and part ("mean" method)."""
    values = parts.assign(x=parts["label"].astype(float))
    grouped = values.groupby(["task", "part"])["x"].agg(["mean", "std", "size", "min", "max"])
    grouped["std0"] = values.groupby(["task", "part"])["x"].std(ddof=0)
    for (task, part), row in grouped.iterrows():
        results.add(task, part, "mean", round(float(row["mean"]), 4), None, row["size"],
                    {"std": round(float(row["std0"]), 4), "min": _py(row["min"]), "max": _py(row["max"])})


def likert_figures(parts: pd.DataFrame) -> dict:
    """Overall mean and standard deviation per dimension, over all votes (seeds 000 and 004)."""
    out = {}
    for dim, group in parts.groupby("dim"):
        x = group["label"].astype(float)
        out[dim] = {"mean": round(float(x.mean()), 4), "std": round(float(x.std(ddof=0)), 4), "n": int(len(x))}
    return out


def bradley_terry(parts: pd.DataFrame, results: Results) -> None:
    """Bradley-Terry per dimension from the pairs each vote implies: of two candidates one worker
    rated together, the higher rating wins; equal ratings give no comparison."""
    from crowdkit.aggregation import BradleyTerry

    for dim, group in parts.groupby("dim"):
        g = group.assign(item=group["task"].astype(str) + "|" + group["part"],
                         x=group["label"].astype(float))[["vote", "worker", "item", "x", "task", "part"]]
        pairs = g.merge(g, on="vote", suffixes=("_l", "_r"))
        pairs = pairs[(pairs["item_l"] < pairs["item_r"]) & (pairs["x_l"] != pairs["x_r"])]
        if pairs.empty:
            results.note(f"bradley_terry ({dim}): no comparisons (every pair tied)")
            continue
        data = pd.DataFrame({"worker": pairs["worker_l"].to_numpy(), "left": pairs["item_l"].to_numpy(),
                             "right": pairs["item_r"].to_numpy(),
                             "label": np.where(pairs["x_l"] > pairs["x_r"], pairs["item_l"], pairs["item_r"])})
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                scores = BradleyTerry(n_iter=100).fit(data).scores_
        except Exception as exc:
            log.exception("Bradley-Terry failed")
            results.note(f"bradley_terry ({dim}): failed: {exc}")
            continue
        compared = pd.concat([data["left"], data["right"]]).value_counts()
        items = g[["item", "task", "part"]].drop_duplicates("item").set_index("item")
        items = items[items.index.isin(scores.index)]
        items["score"] = scores.reindex(items.index).astype(float)
        items["rank"] = items.groupby("task")["score"].rank(ascending=False, method="min")
        for item, row in items.iterrows():
            results.add(row["task"], row["part"], "bradley_terry", round(float(row["score"]), 6), None,
                        compared.get(item, 0), {"rank": int(row["rank"])})


# --- texts ----------------------------------------------------------------------------------------

def _tokens(text: str) -> list[str]:
    return text.split()


def _similarity(a: str, b: str) -> float:
    """Token-set Jaccard similarity (case-insensitive): cheap and embedding-free."""
    sa, sb = set(a.lower().split()), set(b.lower().split())
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def texts(votes: pd.DataFrame, results: Results) -> None:
    """ROVER consensus text per image, and the written caption nearest the others as the
    representative one (the highest mean similarity to the other captions of the image)."""
    from crowdkit.aggregation import ROVER

    rows = [(v, t, w, c, (val or {}).get("text")) for v, t, w, c, val in
            votes[["vote", "task", "worker", "caption", "value"]].itertuples(index=False, name=None)]
    frame = pd.DataFrame(rows, columns=["vote", "task", "worker", "caption", "text"]).dropna(subset=["text"])
    if frame.empty:
        return
    rover = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rover = ROVER(tokenizer=_tokens, detokenizer=" ".join).fit_predict(
                frame[["worker", "task", "text"]]).to_dict()
    except Exception as exc:
        log.exception("ROVER failed")
        results.note(f"rover: failed ({exc}); the representative caption is used instead")
    for task, group in frame.groupby("task"):
        items = list(group[["vote", "caption", "text"]].itertuples(index=False, name=None))
        best, best_sim = items[0], -1.0
        for item in items:
            others = [_similarity(item[2], o[2]) for o in items if o is not item]
            mean_sim = sum(others) / len(others) if others else 1.0
            if mean_sim > best_sim:
                best, best_sim = item, mean_sim
        text = rover.get(task) or best[2]
        details = {"representative": {"vote": int(best[0]), "caption": _py(best[1]), "text": best[2],
                                      "similarity": round(best_sim, 4)}}
        if task not in rover:
            details["fallback"] = "representative"
        results.add(task, "", "rover", text, best_sim, len(items), details)


# --- seed rules -----------------------------------------------------------------------------------

def fluency_consistent(parts: pd.DataFrame, results: Results, min_votes: int) -> dict:
    """Seed 004: a sentence is fluent / not fluent only when all its votes agree and none says
    "difficult"; otherwise it is ignored (label null). A sentence with fewer than ``min_votes``
    votes (2, or 1 in a one-vote campaign) has nothing to be consistent with and is ignored too."""
    figure = {"fluent": 0, "not_fluent": 0, "ignored": 0}
    grouped = parts.assign(difficult=parts["cat"] == "difficult").groupby(["task", "part"]).agg(
        n=("cat", "size"), distinct=("cat", "nunique"), first=("cat", "first"), difficult=("difficult", "any"))
    for (task, part), n, distinct, first, difficult in grouped[["n", "distinct", "first", "difficult"]].itertuples(
            name=None):
        if n >= min_votes and distinct == 1 and not difficult:
            figure[first] = figure.get(first, 0) + 1
            results.add(task, part, "consistent", first, 1.0, n)
        else:
            figure["ignored"] += 1
            reason = "too few votes" if n < min_votes else ("difficult" if difficult else "disagree")
            results.add(task, part, "consistent", None, None, n, {"ignored": reason})
    return figure


def good_shares(parts: pd.DataFrame) -> dict:
    """Seed 002: the share of items with at least 1, 2 and 3 GOOD votes."""
    per_item = parts.assign(good=parts["cat"] == "good").groupby(["task", "part"])["good"].sum()
    n = len(per_item)
    return {f"{k}+": (round(float((per_item >= k).sum()) / n, 4) if n else None) for k in (1, 2, 3)}


# --- agreement ------------------------------------------------------------------------------------

def krippendorff_alpha(parts: pd.DataFrame, metric: str) -> tuple[float | None, int]:
    """Krippendorff's alpha over units (task, part) with at least two votes.

    Alpha depends only on the multiset of values within each unit (the coincidence matrix), not on
    which worker gave them, so the reliability matrix is built with one row per vote slot
    (1st, 2nd, ... vote of a unit) instead of one row per worker: the same alpha as the
    workers x items matrix, with max-votes-per-item rows instead of thousands of workers.
    Returns (alpha or None, number of units used)."""
    import krippendorff

    if parts.empty:
        return None, 0
    column = "cat" if metric == "nominal" else "label"
    frame = parts[["task", "part", column]].copy()
    size = frame.groupby(["task", "part"])[column].transform("size")
    frame = frame[size >= 2]
    if frame.empty:
        return None, 0
    if metric == "nominal":
        codes, _ = pd.factorize(frame[column])
        values = codes.astype(float)
    else:
        values = frame[column].astype(float).to_numpy()
    unit = frame.groupby(["task", "part"]).ngroup().to_numpy()
    slot = frame.groupby(["task", "part"]).cumcount().to_numpy()
    n_units = int(unit.max()) + 1
    if len(np.unique(values)) < 2:
        return None, n_units  # one value everywhere: no disagreement to measure, alpha undefined
    matrix = np.full((int(slot.max()) + 1, n_units), np.nan)
    matrix[slot, unit] = values
    try:
        value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=metric))
    except (ValueError, ZeroDivisionError):
        return None, n_units
    return (round(value, 6) if math.isfinite(value) else None), n_units


# --- distributions --------------------------------------------------------------------------------

def _bucket(score: float) -> str:
    low = min(int(score // 10) * 10, 90)
    return f"{low}-{low + 10 if low == 90 else low + 9}"


def _label_key(kind, part: str, label) -> str:
    if isinstance(kind, SliderKind) and isinstance(label, (int, float)) and not isinstance(label, bool):
        return _bucket(float(label))
    text = "null" if label is None else str(label)
    if isinstance(kind, CandidatesKind) and len(kind.dimensions) > 1:
        return f"{dimension_of(kind, part)}:{text}"
    return text


# --- the entry point ------------------------------------------------------------------------------

def aggregate_campaign(campaign_id: int) -> dict:
    """Recompute every aggregate and figure of a campaign; returns the new ``Campaign.stats``
    ({} when the campaign no longer exists: a queued run may outlive it)."""
    try:
        campaign = Campaign.objects.get(pk=campaign_id)
    except Campaign.DoesNotExist:
        log.info("campaign %s is gone; nothing to aggregate", campaign_id)
        return {}
    kind = campaign.kind_spec
    votes = load_votes(campaign)
    used = votes[~votes["blocked"]]
    results = Results()
    metric = None if isinstance(kind, WriteKind) else kind.scale
    seed_figures: dict = {}
    agreement = {"alpha": None, "metric": metric, "per_part": {}, "n_items": 0}
    reliability: dict[int, list[float]] = {}
    consensus_frames = []

    all_parts = explode_parts(kind, votes) if not isinstance(kind, WriteKind) else None
    if isinstance(kind, WriteKind):
        texts(used, results)
    else:
        parts = all_parts[~all_parts["blocked"]]
        numeric = isinstance(kind, SliderKind) or (isinstance(kind, CandidatesKind) and kind.scale != "nominal")
        if not parts.empty:
            for dim, group in parts.groupby("dim"):
                out = categorical(group, results, dim)
                for worker, value in out["reliability"].items():
                    reliability.setdefault(worker, []).append(value)
                keys = out["keys"].assign(consensus=out["consensus"].reindex(out["keys"]["key"]).to_numpy())
                consensus_frames.append(keys[["task", "part", "consensus"]])
            if numeric:
                means(parts, results)
                seed_figures["likert"] = likert_figures(parts)
            if isinstance(kind, CandidatesKind) and numeric:
                bradley_terry(parts, results)
            if kind.name == "fluency":
                min_votes = 1 if campaign.votes_per_item <= 1 else 2
                seed_figures["fluency_consistent"] = fluency_consistent(parts, results, min_votes)
            if kind.name == "quality":
                seed_figures["good_shares"] = good_shares(parts)
        elif kind.name == "fluency":
            seed_figures["fluency_consistent"] = {"fluent": 0, "not_fluent": 0, "ignored": 0}
        elif kind.name == "quality":
            seed_figures["good_shares"] = {"1+": None, "2+": None, "3+": None}
        alpha, n_items = krippendorff_alpha(parts, metric)
        agreement.update(alpha=alpha, n_items=n_items)
        if isinstance(kind, CandidatesKind):
            agreement["per_part"] = {dim: krippendorff_alpha(group, metric)[0]
                                     for dim, group in parts.groupby("dim")}

    workers = worker_figures(campaign, votes, all_parts, consensus_frames, reliability)
    vote_distribution = _vote_distribution(kind, used, all_parts)
    label_distribution: dict[str, dict] = {}
    for (task, part, method), (label, *_rest) in results.rows.items():
        if method in ("bradley_terry", "rover"):
            continue
        if method == "mean" and not isinstance(kind, SliderKind):
            label = round(label)
        key = _label_key(kind, part, label)
        bucket = label_distribution.setdefault(method, {})
        bucket[key] = bucket.get(key, 0) + 1
    stats = {
        "computed_at": timezone.now().isoformat(),
        # every vote on a real task (what services.progress counts, so a dashboard can tell
        # whether the figures are stale), of which n_votes_excluded are blocked workers' votes
        "n_votes": int(len(votes)),
        "n_votes_used": int(len(used)),
        "n_votes_excluded": int(votes["blocked"].sum()),
        "n_tasks": Task.objects.filter(campaign=campaign, role=Task.Role.REAL).count(),
        "n_tasks_aggregated": len({task for task, _, _ in results.rows}),
        "vote_distribution": vote_distribution,
        "label_distribution": {m: dict(sorted(d.items())) for m, d in sorted(label_distribution.items())},
        "agreement": agreement,
        "workers": workers,
        "seed_figures": seed_figures,
        "methods": sorted(results.methods),
        "notes": results.notes,
    }
    _write(campaign, results, stats, workers)
    return stats


def _vote_distribution(kind, used: pd.DataFrame, all_parts) -> dict:
    if isinstance(kind, WriteKind):
        return {"written": int(len(used))} if len(used) else {}
    parts = all_parts[~all_parts["blocked"]]
    counter = Counter(_label_key(kind, p, label) for p, label in zip(parts["part"], parts["label"]))
    return dict(sorted(counter.items()))


def worker_figures(campaign, votes, all_parts, consensus_frames, reliability) -> list[dict]:
    """Per worker: votes, gold accuracy, Dawid-Skene reliability, agreement with the consensus
    (the share of their labels equal to the Dawid-Skene label, or the majority where DS fell back;
    blocked workers are compared with the consensus of the others), median seconds, blocked."""
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
        joined = all_parts.merge(consensus, on=["task", "part"], how="inner")
        if not joined.empty:
            joined["same"] = joined["cat"].astype(str) == joined["consensus"].astype(str)
            agree = joined.groupby("worker")["same"].mean().to_dict()
    out = []
    for w in sorted(members):
        m = members[w]
        rel = reliability.get(w)
        out.append({
            "worker": int(w), "name": m["name"], "votes": int(n_votes.get(w, 0)),
            "gold_seen": m["gold_seen"], "gold_correct": m["gold_correct"],
            "gold_accuracy": round(m["gold_correct"] / m["gold_seen"], 4) if m["gold_seen"] else None,
            "reliability": round(sum(rel) / len(rel), 4) if rel and not m["blocked"] else None,
            "agreement_with_consensus": round(float(agree[w]), 4) if w in agree else None,
            "median_seconds": round(float(median[w]), 3) if w in median and median[w] == median[w] else None,
            "blocked": bool(m["blocked"]),
        })
    return out


def _name(username, provider, external_id) -> str:
    return username or f"{provider}:{external_id}"


UPSERT_SQL = """
INSERT INTO {table} (task_id, part, method, label, confidence, n_votes, details, updated_at)
SELECT t, p, m, l::jsonb, c, n, d::jsonb, %s
FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::double precision[], %s::int[], %s::text[])
     AS x(t, p, m, l, c, n, d)
ON CONFLICT (task_id, part, method) DO UPDATE SET
    label = EXCLUDED.label, confidence = EXCLUDED.confidence, n_votes = EXCLUDED.n_votes,
    details = EXCLUDED.details, updated_at = EXCLUDED.updated_at
"""


def _upsert(rows: dict, now) -> None:
    """Insert or update the aggregate rows. On PostgreSQL one ``unnest`` statement per batch of
    10,000 (building 100k model instances costs more than the database work); elsewhere
    ``bulk_create(update_conflicts=True)``."""
    if connection.vendor == "postgresql":
        items = list(rows.items())
        with connection.cursor() as cursor:
            for i in range(0, len(items), 10000):
                chunk = items[i:i + 10000]
                cursor.execute(UPSERT_SQL.format(table=connection.ops.quote_name(Aggregate._meta.db_table)), [
                    now, [k[0] for k, _ in chunk], [k[1] for k, _ in chunk], [k[2] for k, _ in chunk],
                    [None if v[0] is None else json.dumps(v[0]) for _, v in chunk], [v[1] for _, v in chunk], [v[2] for _, v in chunk],
                    [json.dumps(v[3]) for _, v in chunk]])
        return
    objs = [Aggregate(task_id=task, part=part, method=method, label=label, confidence=conf, n_votes=n,
                      details=details)
            for (task, part, method), (label, conf, n, details) in rows.items()]
    for i in range(0, len(objs), BATCH):
        Aggregate.objects.bulk_create(objs[i:i + BATCH], update_conflicts=True,
                                      unique_fields=["task", "part", "method"],
                                      update_fields=["label", "confidence", "n_votes", "details", "updated_at"])


def _write(campaign: Campaign, results: Results, stats: dict, workers: list[dict]) -> None:
    """Upsert the aggregates, delete the stale ones, store the stats and reliabilities, under a
    lock on the campaign row so two aggregations of one campaign never interleave."""
    with transaction.atomic():
        Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
        started = timezone.now()
        _upsert(results.rows, started)
        Aggregate.objects.filter(task__campaign=campaign, updated_at__lt=started).delete()
        members = {m.worker_id: m for m in Membership.objects.filter(campaign=campaign, blocked=False)}
        changed = []
        for row in workers:
            member = members.get(row["worker"])
            if member is not None and member.reliability != row["reliability"]:
                member.reliability = row["reliability"]
                changed.append(member)
        Membership.objects.bulk_update(changed, ["reliability"], batch_size=BATCH)
        Campaign.objects.filter(pk=campaign.pk).update(stats=stats, stats_updated_at=timezone.now())


__all__ = ["aggregate_campaign", "krippendorff_alpha", "load_votes", "explode_parts", "ds_reliability"]
