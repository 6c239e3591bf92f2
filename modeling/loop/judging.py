"""A round's judgement on the hold-out: every version the loop trained, and every baseline, on the same items.

``compare`` scores on the hold-out as labelled now (the items are never trained on):

- the new version, and the active one, each judged by the activation rule (modeling.verdicts, the same
  rule as a version trained by hand): the judgement becomes the version's one verdict, stored on the
  version, so the models page, the run page, the API and the CLI show what the loop decided on;
- the versions of every earlier round, re-scored on these same items with a bootstrap interval, so the
  learning curve compares like with like (a round's point is never on a smaller, older hold-out);
- the baselines on the same items, fitted on the labels outside the hold-out: the majority class,
  chance, seed 004's length rule and the word-frequency rule.

Which labels a round trained on were chosen how (``chosen_by``): the labels of round 1 were served in the
campaign's own order (its priority setting: selection order, random, ...), those of round n > 1 by the
sampler that re-prioritised the queue at the end of round n - 1.
"""
from __future__ import annotations

from .. import verdicts
from ..evaluation import binary_report, majority_baseline
from ..models import ModelVersion


def chosen_by(loop, number: int) -> str:
    """How the labels new to round ``number`` were chosen, in words."""
    if number <= 1:
        return f"campaign order ({loop.campaign.get_priority_display().lower()})"
    before = loop.rounds.filter(number__lt=number, status="done").order_by("-number").first()
    return before.sampler if before else f"campaign order ({loop.campaign.get_priority_display().lower()})"


def _predict(version, held: list[dict]) -> list[float]:
    from .. import fluency

    sources = [i["source"] or None for i in held]
    return fluency.score([i["text"] for i in held], version=version, sources=sources if any(sources) else None)


def compare(loop, round_, version, previous, held: list[dict], train_items: list[dict], minimum: int) -> dict:
    """The round's hold-out block: {"n", "minimum", "labels", "majority", "new", "previous", "verdict",
    "previous_verdict", "baselines", "curve", "chosen_by"} (older rounds hold only the first six)."""
    y = [i["label"] for i in held]
    out = {"n": len(y), "minimum": minimum, "labels": {"fluent": sum(y), "not_fluent": len(y) - sum(y)},
           "chosen_by": chosen_by(loop, round_.number), "same_items": True}
    if not y:
        return out
    train_labels = [i["label"] for i in train_items] or y
    rules = verdicts.baseline_predictions([i["text"] for i in train_items], train_labels, [i["text"] for i in held])
    where = f"the loop's hold-out at round {round_.number}"
    seed = loop.seed + round_.number
    out["majority"] = _slim(majority_baseline(train_labels, y))
    probs = _predict(version, held)
    out["new"] = _slim(binary_report(y, probs))
    out["verdict"] = verdicts.judge(y, _binary(probs), rules, basis="holdout", where=where, seed=seed)
    out["baselines"] = out["verdict"]["baselines"]
    scored = {version.pk: probs}
    if previous is not None and previous.pk != version.pk:
        scored[previous.pk] = _predict(previous, held)
        out["previous"] = _slim(binary_report(y, scored[previous.pk]))
        out["previous_verdict"] = verdicts.judge(y, _binary(scored[previous.pk]), rules, basis="holdout",
                                                 where=where, seed=seed)
    out["curve"] = curve(loop, round_, version, held, scored, seed)
    return out


def curve(loop, round_, version, held: list[dict], scored: dict, seed: int) -> list[dict]:
    """One point per finished round with a version (this round's last), each scored on ``held``:
    [{round, version, labels, chosen_by, sampler, macro_f1, interval, n, activated}]."""
    y = [i["label"] for i in held]
    rounds = [r for r in loop.rounds.filter(status="done", number__lt=round_.number).select_related("version")
              .order_by("number") if r.version_id]
    points = []
    for r, v in [(r, r.version) for r in rounds] + [(round_, version)]:
        if v.pk not in scored:
            scored[v.pk] = _predict(v, held)
        pred = _binary(scored[v.pk])
        points.append({"round": r.number, "version": v.version, "labels": r.labels_used,
                       "chosen_by": chosen_by(loop, r.number), "sampler": r.sampler,
                       "macro_f1": round(verdicts.macro_f1(y, pred), 4),
                       "interval": verdicts.bootstrap_interval(y, pred, seed=seed), "n": len(y),
                       "activated": bool(r.activated) if r.pk != round_.pk else None})
    return points


def record_verdicts(version, previous, result: dict) -> str:
    """Store the hold-out judgements as the versions' verdicts (the one each version carries everywhere);
    return a sentence when the active version is now flagged ("" otherwise)."""
    note = ""
    if "verdict" in result:
        _store(version, result["verdict"])
    if previous is not None and "previous_verdict" in result:
        _store(previous, result["previous_verdict"])
        if previous.active and not result["previous_verdict"]["activatable"]:
            note = (f" The active {previous} is flagged on the grown hold-out: "
                    f"{result['previous_verdict']['headline']} (macro F1 {result['previous_verdict']['model']:.3f} on "
                    f"{result['n']} items); it stays active until a curator or a better round replaces it.")
    return note


def _store(version, verdict: dict) -> None:
    """Replace the version's verdict, keeping the sentence it replaces (under ``replaces``)."""
    current = ModelVersion.objects.filter(pk=version.pk).values_list("metrics", flat=True).first() or {}
    before = (current.get("verdict") or {})
    stored = dict(verdict)
    if before.get("text") and before.get("basis") != "holdout":
        stored["replaces"] = before["text"]
    elif before.get("replaces"):
        stored["replaces"] = before["replaces"]
    ModelVersion.objects.filter(pk=version.pk).update(metrics={**current, "verdict": stored})
    version.metrics = {**current, "verdict": stored}


def _binary(probs, threshold: float = 0.5) -> list[int]:
    return [1 if p > threshold else 0 for p in probs]


def _slim(report: dict) -> dict:
    return {k: report[k] for k in ("n", "accuracy", "macro_f1", "f1", "f1_negative", "precision", "recall", "ece",
                                   "confusion", "reliability") if k in report}
