"""What a reader must know before trusting a run's caption metrics, read from what the trainer recorded:
the test references (how many per image, whether people wrote and checked them, how many a model
generated) and whether the evaluation was capped to part of the test split.

The trainer writes ``data_summary["test_references"] = {"per_image": float, "human_verified": bool,
"model_generated": int}`` and, when it scores only part of the split, ``metrics["eval_cap"]`` (the cap)
with ``metrics["eval_images"]`` and ``metrics["eval_images_total"]``; ``{"evaluated": int, "total": int}``
as ``eval_cap`` is read too. Runs from before either existed have neither: then nothing is said.
"""
from __future__ import annotations


def reference_note(run) -> dict | None:
    """{"per_image", "human_verified", "model_generated", "warn"} or None when the run recorded nothing."""
    refs = (run.data_summary or {}).get("test_references")
    if not isinstance(refs, dict):
        return None
    generated = int(refs.get("model_generated") or 0)
    verified = refs.get("human_verified")
    return {"per_image": refs.get("per_image"), "human_verified": verified, "model_generated": generated,
            "warn": verified is not True or generated > 0}


def eval_cap_note(metrics: dict) -> dict | None:
    """{"evaluated", "total"} when the metrics cover fewer test images than the split has, else None."""
    metrics = metrics or {}
    cap = metrics.get("eval_cap")
    if isinstance(cap, dict):
        evaluated, total = cap.get("evaluated"), cap.get("total")
    elif isinstance(cap, (int, float)) and not isinstance(cap, bool):
        # The captioner's form: the cap itself, beside the images scored and the split's size.
        evaluated, total = metrics.get("eval_images", cap), metrics.get("eval_images_total")
    else:
        return None
    if evaluated is None or total is None or int(evaluated) >= int(total):
        return None
    return {"evaluated": int(evaluated), "total": int(total)}


def annotate(run) -> None:
    """Set ``run.references`` and ``run.eval_cap`` for the templates (the compare page's columns)."""
    run.references = reference_note(run)
    run.eval_cap = eval_cap_note(run.metrics)
