"""What the pages, the API and the CLI say about a captioner beside its trivial captioners (the metrics
captioner_judge stores): the table of the model and its baselines, the verdict against retrieval, the
intervals, and the paired comparison of two captioner runs on their common test images."""
from __future__ import annotations

from modeling.metric_keys import clip_to_range

BASELINES = (("most_frequent", "most frequent training caption"),
             ("retrieval", "nearest-neighbour retrieval (Devlin et al. 2015)"),
             ("source_text", "raw source text"))
TABLE_METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")
BELOW_RETRIEVAL = "does not beat retrieval"
# Run metrics that are not results to average or compare as numbers: shown in their own sections.
SECTIONED = ("retrieval_verdict", "intervals", "per_image", "clip.")


def does_not_beat_retrieval(metrics: dict | None) -> bool:
    """True when a captioner's stored verdict says it does not beat nearest-neighbour retrieval."""
    return ((metrics or {}).get("retrieval_verdict") or {}).get("beats_retrieval") is False


def baseline_rows(metrics: dict | None) -> list[dict]:
    """[{key, label, values: [per TABLE_METRICS], caption?, ours?}]: the model first, then each baseline computed."""
    metrics = metrics or {}
    found = metrics.get("caption_baselines") or {}
    if not found:
        return []
    intervals = metrics.get("intervals") or {}
    rows = [{"key": "model", "label": "this captioner", "ours": True,
             "values": [metrics.get(k) for k in TABLE_METRICS],
             "intervals": [intervals.get(k) for k in TABLE_METRICS]}]
    for key, label in BASELINES:
        if key in found:
            row = found[key]
            rows.append({"key": key, "label": label, "values": [row.get(k) for k in TABLE_METRICS],
                         "intervals": [None] * len(TABLE_METRICS), "caption": row.get("caption"),
                         "images": row.get("images"), "k": row.get("k")})
    return rows


def report(metrics: dict | None) -> dict:
    """The run page's captioner context: {"baseline_rows", "retrieval_verdict", "baseline_notes", "too_small",
    "clip"}; empty when the run has no baselines (not a captioner, or older than them)."""
    metrics = metrics or {}
    if "caption_baselines" not in metrics and "retrieval_verdict" not in metrics:
        return {}
    verdict = metrics.get("retrieval_verdict") or {}
    notes = list((metrics.get("caption_baselines") or {}).get("notes") or [])
    too_small = verdict.get("beats_retrieval") is None and verdict.get("text", "").startswith("not judged")
    return {"baseline_rows": baseline_rows(metrics), "table_metrics": TABLE_METRICS, "retrieval_verdict": verdict,
            "baseline_notes": notes, "too_small": too_small, "clip": metrics.get("clip")}


def cli_summary(metrics: dict | None) -> str:
    """One line for ``manage.py models``: CIDEr beside its baselines' and the verdict."""
    metrics = metrics or {}
    found = metrics.get("caption_baselines") or {}
    parts = []
    if isinstance(metrics.get("CIDEr"), (int, float)):
        interval = (metrics.get("intervals") or {}).get("CIDEr")
        parts.append(f"CIDEr {metrics['CIDEr']:.3f}" + (f" [{interval['low']:.3f}, {interval['high']:.3f}]"
                                                         if interval else ""))
    for key, label in (("retrieval", "retrieval"), ("most_frequent", "most frequent"), ("source_text", "source")):
        if isinstance((found.get(key) or {}).get("CIDEr"), (int, float)):
            parts.append(f"{label} {found[key]['CIDEr']:.3f}")
    clip = metrics.get("clip") or {}
    if isinstance(metrics.get("CLIP-S"), (int, float)):
        ref = clip.get("references_CLIP-S")
        parts.append(f"CLIP-S {metrics['CLIP-S']:.3f} (references {ref:.3f}, {clip.get('model', '?')})"
                     if isinstance(ref, (int, float)) else f"CLIP-S {metrics['CLIP-S']:.3f} ({clip.get('model', '?')})")
    verdict = metrics.get("retrieval_verdict") or {}
    if verdict.get("beats_retrieval") is None and verdict.get("text"):
        parts.append(verdict["text"])
    return ", ".join(parts)


def paired_cider(run_a, run_b) -> dict | None:
    """CIDEr of run a minus run b on the test images both scored (paired bootstrap), with a verdict "better",
    "worse" or "same" (not distinguishable: the interval holds zero); None without per-image scores on both."""
    a, b = (run_a.metrics or {}).get("per_image") or {}, (run_b.metrics or {}).get("per_image") or {}
    if not a.get("CIDEr") or not b.get("CIDEr"):
        return None
    in_b = {str(i): v for i, v in zip(b["image_ids"], b["CIDEr"])}
    pairs = [(v, in_b[str(i)]) for i, v in zip(a["image_ids"], a["CIDEr"]) if str(i) in in_b]
    if not pairs:
        return {"n": 0, "verdict": "unknown", "diff": None, "low": None, "high": None}
    from modeling.captioning import bootstrap  # numpy: not on the web process's import path

    test = bootstrap.paired_difference([p[0] for p in pairs], [p[1] for p in pairs])
    test["low"], test["high"] = clip_to_range("CIDEr", test["low"], test["high"], difference=True)
    if test["low"] is None:
        test["verdict"] = "unknown"
    elif bootstrap.excludes_zero(test):
        test["verdict"] = "better" if test["low"] > 0 else "worse"
    else:
        test["verdict"] = "same"
    return test
