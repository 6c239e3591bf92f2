"""Same-meaning pairs campaigns: people judge the candidate pairs of a run's semantic-duplicates step, and their
answers calibrate that step (``curation.pipeline.meaning``).

- ``pair_items``: a campaign's tasks from the step's checked candidate pairs (each caption's
  ``details["pairs"]``), one task per pair, the step's score as the task's model score (so the "uncertain
  first" priority serves the pairs nearest the threshold first);
- ``judged_pairs``: each task's verdict from the counted votes ("can't tell" left out): same or different when
  two or more judges answered and a side has more; a tie, or a single judge, is reported and not used;
- ``pairs_fit``: the judged pairs' features (as the step recorded them) fit a logistic score
  (scikit-learn, L2) and a threshold: the lowest score whose precision on the judged pairs reaches the
  target (0.9), so recall is as high as that precision allows; precision and recall at every threshold,
  for the default and the fitted score, and five-fold cross-validated figures at the chosen threshold (the
  in-sample figures flatter a fit);
- ``pairs_apply``: the fitted weights and threshold written into the run's pipeline step (a curator's act;
  with ``drop`` the threshold becomes ``drop_at`` too, so later runs drop what it calls sure).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from curation.models import Caption, FilterDecision, FilterRun
from curation.pipeline.meaning import DEFAULT_WEIGHTS, FEATURES, PairScorer

from .models import Campaign, Task
from .services import CampaignError

KIND = "same_meaning"
PAIR_FILTERS = ("semantic_duplicates",)
TARGET_PRECISION = 0.9
MIN_FIT = 10  # judged pairs (with both verdicts) before weights are fitted; fewer: the default weights, threshold only


def check_step(run: FilterRun | None, step) -> int:
    if run is None:
        raise CampaignError("A same-meaning campaign needs a filter run (its semantic-duplicates step's candidate "
                            "pairs are the items).", field="run")
    if step in (None, ""):
        raise CampaignError("A same-meaning campaign needs the run's semantic-duplicates step.", field="step")
    step = int(step)
    snapshot = run.snapshot or []
    if not 0 <= step < len(snapshot):
        raise CampaignError(f"Run #{run.pk} has {len(snapshot)} steps; choose one of them.", field="step")
    name = snapshot[step].get("filter", "?")
    if name not in PAIR_FILTERS:
        raise CampaignError(f"Step {step} of run #{run.pk} is {name!r}: a same-meaning campaign needs a "
                            f"{' or '.join(PAIR_FILTERS)} step.", field="step")
    return step


def pair_items(selection: dict) -> list[dict]:
    """Task rows (see ``services.select_items``) for the candidate pairs of the selected run's step."""
    run = FilterRun.objects.filter(pk=selection.get("run") or 0, collection_id=selection.get("collection")).first()
    if run is None and selection.get("run"):
        raise CampaignError("That filter run is not a run over this collection.", field="run")
    step = check_step(run, selection.get("step"))
    seen: dict[tuple[int, int], dict] = {}
    decisions = (FilterDecision.objects.filter(run=run, step=step, caption__isnull=False, details__has_key="pairs")
                 .order_by("pk").values_list("pk", "caption_id", "details"))
    for pk, caption_id, details in decisions:
        for pair in (details or {}).get("pairs") or []:
            other = pair.get("with")
            if not isinstance(other, int) or other == caption_id:
                continue
            key = (min(caption_id, other), max(caption_id, other))
            if key not in seen:
                seen[key] = {"decision": pk, "candidates": [caption_id, other], "model_score": pair.get("score")}
    if not seen:
        raise CampaignError(f"Step {step} of run #{run.pk} recorded no candidate pairs (run it again with the "
                            "semantic-duplicates step of version 2, or lower its min_similarity).", code="empty",
                            field="step")
    images = dict(Caption.objects.filter(pk__in={c for key in seen for c in key}).values_list("pk", "image_id"))
    rows = []
    for key in sorted(seen):
        row = seen[key]
        first = row["candidates"][0]
        if first in images and row["candidates"][1] in images:
            rows.append({"image_id": images[first], "caption_id": first, **row})
    return rows


# --- the people's verdicts -----------------------------------------------------------------------------

@dataclass
class JudgedPair:
    task_id: int
    captions: tuple[int, int]
    same: bool
    votes: dict
    features: dict


@dataclass
class Judged:
    used: list[JudgedPair] = field(default_factory=list)
    ties: list[int] = field(default_factory=list)  # task ids
    single: list[int] = field(default_factory=list)
    unjudged: int = 0
    no_features: list[int] = field(default_factory=list)

    def messages(self) -> list[str]:
        out = []
        if self.ties:
            out.append(f"{len(self.ties)} pair{'s' if len(self.ties) != 1 else ''} with as many 'same' as "
                       f"'different' votes (a tie): not used. Tasks {_ids(self.ties)}; ask for more votes.")
        if self.single:
            out.append(f"{len(self.single)} pair{'s' if len(self.single) != 1 else ''} answered by a single judge: "
                       f"not used (one person's word is not a verdict). Tasks {_ids(self.single)}.")
        if self.no_features:
            out.append(f"{len(self.no_features)} pair(s) whose run no longer records their checks: not used.")
        return out


def _ids(ids: list[int]) -> str:
    shown = ", ".join(f"#{i}" for i in ids[:10])
    return shown + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def judged_pairs(campaign: Campaign) -> Judged:
    from .result_votes import counted_votes

    if campaign.kind != KIND:
        raise CampaignError("Only a same-meaning campaign has pairs to fit.", code="wrong_kind")
    tally: dict[int, Counter] = {}
    for task_id, value in counted_votes(campaign).values_list("task_id", "value"):
        label = value.get("label") if isinstance(value, dict) else None
        if label in ("same", "different"):
            tally.setdefault(task_id, Counter())[label] += 1
    tasks = list(campaign.tasks.filter(role=Task.Role.REAL).order_by("pk")
                 .values_list("pk", "candidates", "source_decision"))
    details = dict(FilterDecision.objects.filter(pk__in=[d for _, _, d in tasks if d]).values_list("pk", "details"))
    judged = Judged()
    for task_id, candidates, decision in tasks:
        votes = tally.get(task_id, Counter())
        total = votes["same"] + votes["different"]
        if total == 0:
            judged.unjudged += 1
            continue
        if total == 1:
            judged.single.append(task_id)
            continue
        if votes["same"] == votes["different"]:
            judged.ties.append(task_id)
            continue
        features = _features(details.get(decision) or {}, candidates)
        if features is None:
            judged.no_features.append(task_id)
            continue
        judged.used.append(JudgedPair(task_id, tuple(candidates), votes["same"] > votes["different"], dict(votes),
                                      features))
    return judged


def _features(details: dict, candidates) -> dict | None:
    if len(candidates or []) != 2:
        return None
    other = candidates[1]
    for pair in details.get("pairs") or []:
        if pair.get("with") == other and isinstance(pair.get("features"), dict):
            return {k: float(pair["features"].get(k, 0)) for k in FEATURES}
    return None


# --- fitting --------------------------------------------------------------------------------------------

@dataclass
class Curve:
    thresholds: list[float]
    precision: list[float]
    recall: list[float]


@dataclass
class PairsFit:
    judged: Judged
    messages: list[str]
    weights: dict | None = None  # fitted; None: too few judged pairs, the default weights stand
    threshold: float | None = None
    precision: float | None = None  # on the judged pairs at the threshold (in sample)
    recall: float | None = None
    cv_precision: float | None = None  # five-fold cross-validated, at the threshold
    cv_recall: float | None = None
    default: Curve | None = None
    fitted: Curve | None = None
    target: float = TARGET_PRECISION

    @property
    def usable(self) -> bool:
        return self.threshold is not None

    def as_dict(self) -> dict:
        def curve(c: Curve | None) -> dict | None:
            return None if c is None else {"thresholds": c.thresholds, "precision": c.precision, "recall": c.recall}

        j = self.judged
        return {"pairs_used": len(j.used), "same": sum(p.same for p in j.used), "ties": j.ties, "single_judge": j.single,
                "unjudged": j.unjudged, "messages": self.messages, "weights": self.weights, "threshold": self.threshold,
                "target_precision": self.target, "precision": self.precision, "recall": self.recall,
                "cv_precision": self.cv_precision, "cv_recall": self.cv_recall,
                "default_curve": curve(self.default), "fitted_curve": curve(self.fitted)}


def _curve(labels: list[bool], scores: list[float]) -> Curve:
    thresholds = sorted({round(s, 4) for s in scores} | {0.5})
    out = Curve([], [], [])
    positives = sum(labels)
    for t in thresholds:
        called = [y for y, s in zip(labels, scores) if s >= t]
        tp = sum(called)
        out.thresholds.append(t)
        out.precision.append(round(tp / len(called), 4) if called else 1.0)
        out.recall.append(round(tp / positives, 4) if positives else 0.0)
    return out


def _choose(curve: Curve, target: float) -> tuple[int, bool]:
    """The index of the lowest threshold whose precision reaches ``target`` with some recall (True), else of
    the best F1 (False)."""
    for k, (p, r) in enumerate(zip(curve.precision, curve.recall)):
        if p >= target and r > 0:
            return k, True
    f1 = [2 * p * r / (p + r) if p + r else 0.0 for p, r in zip(curve.precision, curve.recall)]
    return max(range(len(f1)), key=f1.__getitem__), False


def pairs_fit(campaign: Campaign, target: float = TARGET_PRECISION) -> PairsFit:
    """The fit of the campaign's judged pairs; never raises for too few or inconclusive answers (the messages
    say what is missing)."""
    judged = judged_pairs(campaign)
    messages = judged.messages()
    fit = PairsFit(judged, messages, target=target)
    used = judged.used
    labels = [p.same for p in used]
    if not used:
        messages.append("No pair has a verdict yet: each needs two or more judges, more of them on one side.")
        return fit
    default_scorer = PairScorer()
    fit.default = _curve(labels, [default_scorer.score(p.features) for p in used])
    if len(set(labels)) < 2:
        messages.append(f"Every judged pair is {'the same' if labels[0] else 'different'} meaning: precision and "
                        "recall need both; the threshold is not fitted.")
        return fit
    x = [[p.features[k] for k in FEATURES] for p in used]
    if len(used) >= MIN_FIT and min(labels.count(True), labels.count(False)) >= 3:
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=1.0, max_iter=1000).fit(x, labels)
        fit.weights = {"bias": round(float(model.intercept_[0]), 4),
                       **{k: round(float(w), 4) for k, w in zip(FEATURES, model.coef_[0])}}
        scorer = PairScorer(fit.weights)
        _cross_validate(fit, x, labels, target)
    else:
        messages.append(f"{len(used)} judged pairs: the checks' weights are fitted from {MIN_FIT} (with three of each "
                        "verdict); until then the default weights stand and only the threshold is fitted.")
        scorer = default_scorer
    fit.fitted = _curve(labels, [scorer.score(p.features) for p in used])
    k, reached = _choose(fit.fitted, target)
    fit.threshold, fit.precision, fit.recall = fit.fitted.thresholds[k], fit.fitted.precision[k], fit.fitted.recall[k]
    if not reached:
        messages.append(f"No threshold reaches precision {target:.2f} on the judged pairs; the one shown has the "
                        "best F1. Do not let it drop captions.")
    return fit


def _cross_validate(fit: PairsFit, x, labels, target: float) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    folds = min(5, labels.count(True), labels.count(False))
    if folds < 2:
        return
    model = LogisticRegression(C=1.0, max_iter=1000)
    scores = cross_val_predict(model, x, labels, cv=StratifiedKFold(folds, shuffle=True, random_state=0),
                               method="predict_proba")[:, 1]
    curve = _curve(labels, [float(s) for s in scores])
    k, _ = _choose(curve, target)
    fit.cv_precision, fit.cv_recall = curve.precision[k], curve.recall[k]


# --- applying ---------------------------------------------------------------------------------------------

def pairs_apply(*, campaign: Campaign, drop: bool = False, user=None) -> dict:
    """Write the fit into the step of the run's pipeline (later runs use it); returns the step's new params.
    CampaignError when the fit is not usable or the run's pipeline is gone."""
    from curation import services as curation_services
    from curation.errors import IngestError

    fit = pairs_fit(campaign)
    if not fit.usable:
        raise CampaignError("Nothing to apply: " + " ".join(fit.messages), code="not_fitted")
    if drop and (fit.precision or 0) < fit.target:
        raise CampaignError(f"The fitted threshold does not reach precision {fit.target:.2f} on the judged pairs: "
                            "it may not drop captions.", code="not_precise")
    run = FilterRun.objects.select_related("pipeline").filter(pk=(campaign.selection or {}).get("run")).first()
    if run is None or run.pipeline is None:
        raise CampaignError("The campaign's run, or its pipeline, no longer exists.", code="not_found")
    step = int(campaign.selection.get("step"))
    steps = [dict(s) for s in run.pipeline.steps]
    if not 0 <= step < len(steps) or steps[step].get("filter") not in PAIR_FILTERS:
        raise CampaignError(f"Step {step} of pipeline {run.pipeline.name!r} is no longer a semantic-duplicates step.",
                            code="invalid")
    params = dict(steps[step].get("params") or {})
    params["weights"] = fit.weights or dict(DEFAULT_WEIGHTS)
    params["threshold"] = fit.threshold
    if drop:
        params["drop_at"] = fit.threshold
    steps[step] = {**steps[step], "params": params}
    try:
        curation_services.pipeline_save(name=run.pipeline.name, steps=steps, description=run.pipeline.description,
                                        pipeline=run.pipeline, user=user)
    except IngestError as exc:
        raise CampaignError(exc.message) from None
    return {"pipeline": run.pipeline.pk, "step": step, "params": params}


def fit_chart(fit: PairsFit):
    """Precision and recall against the score threshold on the judged pairs, the chosen threshold marked."""
    from captionlab import charts

    if fit.fitted is None and fit.default is None:
        return charts.empty("pairs-fit", "Precision and recall", "No judged pairs yet.")
    lines = []
    for name, curve, dash in (("fitted", fit.fitted, ""), ("default", fit.default, "4 3")):
        if curve is None:
            continue
        lines.append(charts.Line(f"precision ({name})", list(zip(curve.thresholds, curve.precision)),
                                 charts.PALETTE[0], dash=dash))
        lines.append(charts.Line(f"recall ({name})", list(zip(curve.thresholds, curve.recall)), charts.PALETTE[1],
                                 dash=dash))
    markers = [charts.Marker(fit.threshold, f"threshold {fit.threshold:.2f}", attrs={"data-role": "threshold"})] \
        if fit.threshold is not None else []
    ticks = [0, 0.25, 0.5, 0.75, 1]
    return charts.line_chart("pairs-fit", "Precision and recall of the judged pairs by score threshold", lines,
                             x=(0, 1), y=(0, 1), x_ticks=ticks, y_ticks=ticks, x_title="score threshold",
                             y_title="share", markers=markers)


__all__ = ["KIND", "JudgedPair", "PairsFit", "check_step", "fit_chart", "judged_pairs", "pair_items", "pairs_apply",
           "pairs_fit"]
