"""Provenance of release items, and the release's canonical manifest.

Per item (``ReleaseItem.provenance``), all copied at freezing time::

    {"image": 12, "collection": 3, "caption": 345, "origin": "transformed", "source": "...",
     "lineage": [{"caption": 345, "origin": "transformed", "source": "run 7: hypernymize", "text": ...},
                 {"caption": 301, "origin": "alt_text", "source": "cc.tsv", "text": <raw text>}],
     "run": 7,
     "decisions": [{"step": 0, "filter": "...", "version": 2, "target": "image"|"caption",
                    "outcome": "drop", "override": "keep", "final": "keep", "score": 0.4, "reason": "..."}],
     "overrides": [{"step": 0, "filter": "...", "outcome": "keep", "note": "...", "user": "alice", "at": iso}],
     "votes": [{"campaign": 4, "kind": "quality", "caption": 301, "part": "", "method": "dawid_skene",
                "label": "good", "confidence": 0.93, "n_votes": 3}],
     "rules": [{"campaign": 4, "rule": "good_2plus", "satisfied": true}],
     "models": {"versions": {...FilterRun.versions}, "scored_by": ["fluency"]}}

The lineage runs from the released text back to the raw text (raw last). The manifest is JSON
Lines: a header with the config, then one line per item in position order, every line JSON with
sorted keys and fixed separators; ``Release.content_hash`` is the sha256 of those bytes.
"""
from __future__ import annotations

import hashlib
import json

MANIFEST_VERSION = 1
# The item fields the manifest (and so the content hash) covers, in this order of columns.
ITEM_FIELDS = ("position", "split", "image_sha256", "image_file", "image_format", "width", "height", "license",
               "credit", "external_id", "text", "language", "human_verified", "provenance")


def canonical(obj) -> bytes:
    """Canonical JSON bytes: sorted keys, fixed separators, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def header_line(config: dict) -> bytes:
    return canonical({"manifest": MANIFEST_VERSION, "config": config}) + b"\n"


def item_line(row: tuple) -> bytes:
    """One manifest line from a row of ``ITEM_FIELDS`` values."""
    return canonical(dict(zip(ITEM_FIELDS, row))) + b"\n"


def manifest_lines(release, chunk_size: int = 2000):
    """The release's manifest, line by line (bytes), streamed from the database."""
    from releases.models import ReleaseItem

    yield header_line(release.config)
    rows = (ReleaseItem.objects.filter(release=release).order_by("position")
            .values_list(*ITEM_FIELDS).iterator(chunk_size=chunk_size))
    for row in rows:
        yield item_line(row)


def content_hash(release) -> str:
    digest = hashlib.sha256()
    for line in manifest_lines(release):
        digest.update(line)
    return digest.hexdigest()


# --- building an item's provenance -----------------------------------------------------------------

def lineage(caption_id: int, captions: dict[int, dict]) -> list[dict]:
    """From a caption back to its raw text through ``parent``: [{caption, origin, source, text}].
    ``captions`` maps ids to value dicts (pk, parent_id, origin, source, text); parents that are
    not in it are read from the database (they belong to another image: rare)."""
    from curation.models import Caption

    chain, seen, node_id = [], set(), caption_id
    while node_id is not None and node_id not in seen:
        seen.add(node_id)
        node = captions.get(node_id)
        if node is None:
            node = (Caption.objects.filter(pk=node_id)
                    .values("pk", "parent_id", "origin", "source", "text").first())
            if node is None:
                break
            captions[node_id] = node
        chain.append({"caption": node["pk"], "origin": node["origin"], "source": node["source"],
                      "text": node["text"]})
        node_id = node["parent_id"]
    return chain


def decision_entry(row: dict, snapshot: list) -> dict:
    step = snapshot[row["step"]] if 0 <= row["step"] < len(snapshot) else {}
    final = row["override"] or row["outcome"]
    entry = {"step": row["step"], "filter": row["filter_name"], "version": step.get("version"),
             "target": "caption" if row["caption_id"] is not None else "image",
             "outcome": row["outcome"], "final": final, "score": row["score"], "reason": row["reason"]}
    if row["override"]:
        entry["override"] = row["override"]
    return entry


def review_entry(review: dict, decision: dict) -> dict:
    at = review["created_at"]
    return {"step": decision["step"], "filter": decision["filter_name"], "outcome": review["outcome"],
            "note": review["note"], "user": review["user__username"],
            "at": at.isoformat() if hasattr(at, "isoformat") else at}


def vote_entry(agg: dict, caption_id: int, kind: str) -> dict:
    return {"campaign": agg["task__campaign_id"], "kind": kind, "caption": caption_id, "part": agg["part"],
            "method": agg["method"], "label": agg["label"], "confidence": agg["confidence"],
            "n_votes": agg["n_votes"]}


def build(*, image: dict, caption: dict, chain: list[dict], run=None, decisions=(), reviews=(), votes=(),
          rules=()) -> dict:
    """One item's provenance dict (see the module docstring)."""
    out = {"image": image["pk"], "collection": image["collection_id"], "caption": caption["pk"],
           "origin": caption["origin"], "source": caption["source"], "lineage": chain,
           "run": run.pk if run is not None else None}
    if run is not None:
        ordered = sorted(decisions, key=lambda d: (d["step"], d["target"] != "image"))
        out["decisions"] = ordered
        out["overrides"] = list(reviews)
        scored = sorted({d["filter"] for d in ordered if d["score"] is not None})
        if scored:
            out["models"] = {"versions": run.versions or {}, "scored_by": scored}
    out["votes"] = sorted(votes, key=lambda v: (v["campaign"], v["caption"], v["part"], v["method"]))
    if rules:
        out["rules"] = list(rules)
    return out


__all__ = ["ITEM_FIELDS", "MANIFEST_VERSION", "canonical", "header_line", "item_line", "manifest_lines",
           "content_hash", "lineage", "build"]
