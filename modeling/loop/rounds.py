"""One round of a learning loop, start to end (the body of the ``modeling.loop_round`` task).

aggregating -> training (a TrainingRun on the campaign's labels, the hold-out excluded) -> evaluating (every
version the loop trained and every baseline on the hold-out as labelled now, modeling.loop.judging; the new
version is activated only when its verdict there passes the activation rule of modeling.verdicts and it beats
the active one) -> random arm (the same trainer on random subsets of the labelled pool, where the trainer is fast
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
from ..models import LoopRound, ModelVersion, TrainingRun
from ..threads import torch_threads
from ..trainers import get_trainer
from ..trainers.fluency_data import labelled_items
from . import holdout, judging, random_arm, rescore

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
    train_items, _ = labelled_items(campaign, exclude_tasks=loop.holdout_tasks or ())
    result = judging.compare(loop, round_, version, previous, held, train_items, loop.min_holdout)
    flag_note = judging.record_verdicts(version, previous, result)
    activated, decision = decide(version, previous, result, round_.created_by)
    decision += flag_note if not activated else ""
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


def decide(version, previous, result: dict, user) -> tuple[bool, str]:
    """Activate the new version only when the hold-out has ``minimum`` items, its verdict there passes the
    activation rule (modeling.verdicts.RULE: the best baseline beaten by the margin, the interval of the
    difference above zero, enough items) and it beats the active version on the same items; otherwise keep
    the active one and say why."""
    keep = f"kept {previous}" if previous else "no version is active"
    if result["n"] < result["minimum"]:
        return False, (f"Not activated: the hold-out has {result['n']} labelled items and comparing versions needs "
                       f"{result['minimum']}; {keep}. Label more of the campaign (hold-out tasks are spread "
                       f"through the queue).")
    new, judged = result["new"]["macro_f1"], result["verdict"]
    if not judged["activatable"]:
        return False, f"Not activated: {version} is flagged on the hold-out ({judged['text']}); {keep}."
    if "previous" in result and new <= result["previous"]["macro_f1"]:
        return False, (f"Not activated: {version} macro F1 {new:.3f} does not beat the active {previous}'s "
                       f"{result['previous']['macro_f1']:.3f} on the same {result['n']} hold-out items; {keep}.")
    try:
        registry.activate(version, user)
    except engine.TrainingError as exc:
        return False, f"Not activated: {exc}; {keep}."
    against = (f" against {previous}'s {result['previous']['macro_f1']:.3f}" if "previous" in result
               else f" against the best baseline's {judged['best_macro_f1']:.3f} ({judged['best']})")
    return True, (f"Activated {version}: hold-out macro F1 {new:.3f}{against} on {result['n']} items, "
                  f"difference with the best baseline {judged['difference']:+.3f} "
                  f"(95% interval {judged['interval'][0]:+.3f} to {judged['interval'][1]:+.3f}).")


__all__ = ["run_round", "decide", "trained_on"]
