"""Re-score a campaign's open tasks with a version and re-prioritise them with the loop's sampler."""
from __future__ import annotations

import numpy as np

from .. import fluency
from . import holdout, samplers

UPDATE_BATCH = 2000


def open_tasks(campaign) -> list[dict]:
    """[{task, text, source, priority}] of the campaign's open real tasks with a caption."""
    from annotation.models import Task

    rows = (Task.objects.filter(campaign=campaign, role=Task.Role.REAL, status=Task.Status.OPEN,
                                caption__isnull=False)
            .order_by("pk").values_list("pk", "priority", "caption__text", "caption__metadata",
                                        "caption__parent__text"))
    out = []
    for pk, priority, text, meta, parent in rows:
        source = (meta or {}).get("source_text") if isinstance((meta or {}).get("source_text"), str) else None
        out.append({"task": pk, "priority": priority, "text": text or "", "source": source or parent or ""})
    return out


def score_tasks(tasks: list[dict], version) -> tuple[np.ndarray, np.ndarray | None]:
    """(f per task, the model's standardised input features for the hybrid sampler or None). A trainer
    that builds features (the encoder head) computes them once for both; others score through
    modeling.fluency."""
    from ..registry import load_version

    texts = [t["text"] for t in tasks]
    sources = [t["source"] or None for t in tasks]
    sources = sources if any(sources) else None
    trainer, model, info = load_version(fluency.resolve(version))
    if not hasattr(trainer, "text_features"):
        return np.asarray(fluency.score(texts, version=version, sources=sources), dtype=np.float64), None
    x = trainer.features_like(info, texts, sources)
    return np.asarray(trainer.predict_features(model, x), dtype=np.float64), trainer.sampler_features(model, x)


def reprioritise(loop, tasks: list[dict], probs: np.ndarray, labels_so_far: int, round_number: int,
                 features=None) -> dict:
    """Write model_score and priority of every open task; return what changed."""
    from annotation.models import Task

    held = set(loop.holdout_tasks or []) if loop.holdout_source == "random" else set()
    pool = [n for n, t in enumerate(tasks) if t["task"] not in held]
    ranked = samplers.order(probs[pool], loop.sampler, seed=loop.seed * 1000 + round_number,
                            batch_size=loop.batch_size, random_share=loop.random_share, labels_so_far=labels_so_far,
                            features=features[pool] if features is not None else None)
    ranked_tasks = [tasks[pool[i]]["task"] for i in ranked]
    held_tasks = [t["task"] for t in tasks if t["task"] in held]
    new_priority = holdout.interleave(ranked_tasks, held_tasks, loop.holdout_fraction if held else 0.0)
    before = {t["task"]: t["priority"] for t in tasks}
    objs = [Task(pk=t["task"], model_score=round(float(p), 6), priority=new_priority[t["task"]])
            for t, p in zip(tasks, probs)]
    Task.objects.bulk_update(objs, ["model_score", "priority"], batch_size=UPDATE_BATCH)
    return _changes(before, new_priority, loop.batch_size, probs)


def _changes(before: dict, after: dict, batch: int, probs: np.ndarray) -> dict:
    from scipy.stats import spearmanr

    tasks = list(before)
    old_next = set(sorted(tasks, key=lambda t: (before[t], t))[:batch])
    new_next = set(sorted(tasks, key=lambda t: (after[t], t))[:batch])
    rho = None
    if len(tasks) > 2:
        value = spearmanr([before[t] for t in tasks], [after[t] for t in tasks]).statistic
        rho = None if value != value else round(float(value), 4)  # NaN when the old order was constant
    return {"rescored": len(tasks), "next_batch": batch, "next_batch_changed": len(new_next - old_next),
            "rank_correlation": rho, "mean_score": round(float(probs.mean()), 4) if len(probs) else None,
            "uncertain": int(np.sum(np.abs(probs - 0.5) < 0.1))}


def rescore_filter_run(loop, version) -> dict | None:
    """The curation run the campaign was drawn from: re-score its fluency decisions' scores with the new
    version (scores only: outcomes and reviews stay, a re-run of the pipeline decides anew)."""
    from curation.models import FilterDecision

    selection = loop.campaign.selection or {}
    run_id, step = selection.get("run"), selection.get("step")
    if not run_id or step in (None, ""):
        return None
    decisions = FilterDecision.objects.filter(run_id=run_id, step=int(step), caption__isnull=False)
    rows = list(decisions.values_list("pk", "caption__text"))
    if not rows or not _step_is_fluency(run_id, int(step)):
        return {"run": run_id, "step": int(step), "rescored": 0, "note": "that step is not the fluency filter"}
    scores = fluency.score([text for _, text in rows], version=version)
    objs = [FilterDecision(pk=pk, score=round(float(s), 6)) for (pk, _), s in zip(rows, scores)]
    FilterDecision.objects.bulk_update(objs, ["score"], batch_size=UPDATE_BATCH)
    return {"run": run_id, "step": int(step), "rescored": len(objs)}


def _step_is_fluency(run_id: int, step: int) -> bool:
    from curation.models import FilterRun

    run = FilterRun.objects.filter(pk=run_id).first()
    steps = (run.snapshot if run else None) or []
    return 0 <= step < len(steps) and (steps[step] or {}).get("filter") == "fluency"
