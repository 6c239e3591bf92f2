"""One round of a learning loop, start to end (the body of the ``modeling.loop_round`` task).

aggregating -> training (a TrainingRun on the campaign's labels, the hold-out excluded) -> evaluating (the
new version, the active one and the majority class on the hold-out; activate only if the new one beats
both) -> random arm (the same trainer on random subsets of the labelled pool, where the trainer is fast
enough) -> rescoring and prioritising (every open task scored by the active version, ordered by the
sampler). A heartbeat thread writes ``heartbeat_at`` every few seconds; a round whose worker dies is
marked failed by the sweep within two minutes, and until then routing keeps serving the old priorities.
A re-delivered task resumes: a finished training run is reused, a killed one resumes from its checkpoint.
"""
from __future__ import annotations

import logging
import threading

from django.db import DatabaseError, connection
from django.utils import timezone

from .. import engine, registry
from ..evaluation import binary_report, majority_baseline, verdict
from ..models import LoopRound, ModelVersion, TrainingRun
from ..threads import torch_threads
from ..trainers import get_trainer
from . import holdout, random_arm, rescore

log = logging.getLogger(__name__)
HEARTBEAT_S = 10


class _Heartbeat:
    def __init__(self, round_id: int):
        self.round_id, self.stop = round_id, threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name=f"loop-round-{round_id}")

    def _beat(self):
        try:
            while not self.stop.wait(HEARTBEAT_S):
                try:
                    LoopRound.objects.filter(pk=self.round_id, status=LoopRound.Status.RUNNING).update(
                        heartbeat_at=timezone.now())
                except DatabaseError:  # a missed beat is logged; the stages beat too
                    log.warning("loop round %s: heartbeat not written", self.round_id, exc_info=True)
        finally:
            connection.close()

    def __enter__(self):
        # SQLite (the embedded default) allows one writer: the stages' own beats are enough there.
        if connection.vendor != "sqlite":
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)


def _stage(round_, stage: str, echo=None, **fields):
    fields.update(stage=stage, heartbeat_at=timezone.now())
    LoopRound.objects.filter(pk=round_.pk).update(**fields)
    for key, value in fields.items():
        setattr(round_, key, value)
    if echo:
        echo(f"round {round_.number}: {stage}")


def run_round(round_id: int, echo=None) -> LoopRound:
    """Run (or resume) a round; failures are stored on the row (status failed, error), never raised."""
    claimed = LoopRound.objects.filter(pk=round_id, status__in=["queued", "running"]).update(
        status=LoopRound.Status.RUNNING, heartbeat_at=timezone.now())
    round_ = LoopRound.objects.select_related("loop__campaign", "training_run").get(pk=round_id)
    if not claimed:
        return round_
    if round_.started_at is None:
        LoopRound.objects.filter(pk=round_id).update(started_at=timezone.now())
    try:
        with _Heartbeat(round_id):
            _run(round_, echo)
    except Exception as exc:
        log.exception("learning loop round %s failed", round_id)
        LoopRound.objects.filter(pk=round_id).update(status=LoopRound.Status.FAILED, error=str(exc)[:2000],
                                                     finished_at=timezone.now())
    round_.refresh_from_db()
    return round_


def _run(round_, echo) -> None:
    from annotation.aggregation import aggregate_campaign

    loop = round_.loop
    campaign = loop.campaign
    _stage(round_, "aggregating", echo)
    aggregate_campaign(campaign.pk)
    previous = registry.active_version(loop.kind)
    _stage(round_, "training", echo, previous_version=previous)
    threads = int(get_trainer(loop.trainer).config(loop.config).get("torch_threads", 0))
    with torch_threads(threads):
        run = _train(round_, loop, echo)
    version = ModelVersion.objects.filter(run=run).first()
    labels = trained_on(run.data_summary or {})
    _stage(round_, "evaluating", echo, version=version, training_run=run,
           labels_used=int(sum(labels.values())), label_counts=labels)
    held = holdout.labelled(loop)
    train_labels = [1] * int(labels.get("fluent", 0)) + [0] * int(labels.get("not_fluent", 0))
    result = compare(version, previous, held, train_labels, loop.min_holdout)
    activated, decision = decide(version, previous, result, round_.created_by)
    with torch_threads(threads):
        result["random_arm"] = random_arm.curve(loop, round_, held, echo)
    _stage(round_, "rescoring", echo, holdout=result, activated=activated, decision=decision)
    scorer = registry.active_version(loop.kind) or version
    tasks = rescore.open_tasks(campaign)
    probs, features = rescore.score_tasks(tasks, scorer) if tasks else (None, None)
    _stage(round_, "prioritising", echo)
    changes = rescore.reprioritise(loop, tasks, probs, round_.labels_used, round_.number, features) if tasks else \
        {"rescored": 0, "note": "no open tasks left"}
    changes["scored_by"] = {"pk": scorer.pk, "version": scorer.version}
    if activated:
        changes["filter_run"] = rescore.rescore_filter_run(loop, scorer)
    LoopRound.objects.filter(pk=round_.pk).update(status=LoopRound.Status.DONE, stage="done", changes=changes,
                                                  finished_at=timezone.now(), heartbeat_at=timezone.now())
    if echo:
        echo(f"round {round_.number}: done. {decision}")


def _train(round_, loop, echo) -> TrainingRun:
    run = round_.training_run
    if run is None:
        config = {**(loop.config or {}), "exclude_tasks": list(loop.holdout_tasks or []),
                  "seed": loop.seed + round_.number, "device": (loop.config or {}).get("device", "auto")}
        run = engine.create_run(loop.trainer, config, campaign=loop.campaign, user=round_.created_by,
                                name=f"{loop.campaign.name[:150]} · round {round_.number}")
        LoopRound.objects.filter(pk=round_.pk).update(training_run=run)
    if not run.finished:
        run = engine.train(run.pk, echo=echo)
    if run.status != TrainingRun.Status.DONE:
        raise RuntimeError(f"Training failed: {run.error or run.status}")
    return run


def trained_on(summary: dict) -> dict:
    """{"fluent": n, "not_fluent": n} the version's weights were fitted on: the run's training and
    validation splits (its own test split scores the run's page, not the loop's)."""
    splits = summary.get("splits") or {}
    if "train" not in splits:
        return dict(summary.get("labels") or {})
    return {label: sum(int((splits.get(part) or {}).get(label, 0)) for part in ("train", "val"))
            for label in ("fluent", "not_fluent")}


def compare(version, previous, held: list[dict], train_labels: list[int], minimum: int) -> dict:
    """Hold-out reports of the new version, the active one and the majority class."""
    from .. import fluency

    y = [i["label"] for i in held]
    out = {"n": len(y), "minimum": minimum, "labels": {"fluent": sum(y), "not_fluent": len(y) - sum(y)}}
    if not y:
        return out
    texts = [i["text"] for i in held]
    sources = [i["source"] or None for i in held]
    sources = sources if any(sources) else None
    out["majority"] = _slim(majority_baseline(train_labels or y, y))
    out["new"] = _slim(binary_report(y, fluency.score(texts, version=version, sources=sources)))
    if previous is not None and previous.pk != version.pk:
        out["previous"] = _slim(binary_report(y, fluency.score(texts, version=previous, sources=sources)))
    out["verdict"] = verdict({"report": out["new"], "baselines": {"majority": out["majority"]}})
    return out


def _slim(report: dict) -> dict:
    return {k: report[k] for k in ("n", "accuracy", "macro_f1", "f1", "f1_negative", "precision", "recall", "ece",
                                   "confusion", "reliability") if k in report}


def decide(version, previous, result: dict, user) -> tuple[bool, str]:
    """Activate the new version only when the hold-out can tell and it beats the majority class and the
    active version there; otherwise keep the active one and say why."""
    keep = f"kept {previous}" if previous else "no version is active"
    if result["n"] < result["minimum"]:
        return False, (f"Not activated: the hold-out has {result['n']} labelled items and comparing versions needs "
                       f"{result['minimum']}; {keep}. Label more of the campaign (hold-out tasks are spread "
                       f"through the queue).")
    new = result["new"]["macro_f1"]
    if not result["verdict"]["beats_majority"]:
        return False, f"Not activated: {version} {result['verdict']['text']} on the hold-out; {keep}."
    if "previous" in result and new <= result["previous"]["macro_f1"]:
        return False, (f"Not activated: {version} macro F1 {new:.3f} does not beat the active {previous}'s "
                       f"{result['previous']['macro_f1']:.3f} on the hold-out; {keep}.")
    try:
        registry.activate(version, user)
    except engine.TrainingError as exc:
        return False, f"Not activated: {exc}; {keep}."
    against = (f" against {previous}'s {result['previous']['macro_f1']:.3f}" if "previous" in result
               else f" against the majority class's {result['majority']['macro_f1']:.3f}")
    return True, f"Activated {version}: hold-out macro F1 {new:.3f}{against}."


__all__ = ["run_round", "compare", "decide", "trained_on"]
