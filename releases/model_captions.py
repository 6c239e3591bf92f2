"""Model-generated captions in a release.

A captioner's outputs go back into the collection as ``origin="model"`` captions. Used as references
they score a captioner against its own (or a sibling's) outputs: on the same outputs BLEU-4 went from
0.332 to 0.712 with them in the test split. So a release leaves them out unless its config asks
(``include_model_captions``, or "model" among ``origins``), and even then never in the test split:

- ``generated(caption, captions)``: whether a caption is, or was transformed from, a model caption;
- the selection keeps an image whose only captions are model captions out of the test quota (the
  split plan's eligibility), so a test image always keeps a human reference;
- ``drop_from_test(release, positions, report)``: after the splits are assigned, the model captions
  of test images are deleted, not moved to train (that would put a test image into training data),
  and reported. Positions then have gaps; they stay a stable order, which is all they promise.
"""
from __future__ import annotations

from array import array

from . import Report

MODEL = "model"
DELETE_BATCH = 5000


def generated(caption: dict, captions: dict[int, dict]) -> bool:
    """Whether ``caption`` (a row with origin and parent_id) is a model caption or descends from one
    (``captions``: the page's rows by id; the chain stays within one image, so its page holds it)."""
    node, hops = caption, 0
    while node is not None and hops < 50:
        if node["origin"] == MODEL:
            return True
        node = captions.get(node["parent_id"]) if node.get("parent_id") else None
        hops += 1
    return False


def report_left_out(report: Report, count: int) -> None:
    """One entry for the model captions the default left out (one per caption would flood the report)."""
    if count:
        report.add("model_captions_excluded", f"{count} model-generated caption(s) were left out: a release holds "
                   "them only when include_model_captions is set.", captions=count)


def drop_from_test(release, positions: array, report: Report) -> int:
    """Delete the items at ``positions`` (model captions) that landed in the test split; returns how many."""
    from releases.models import ReleaseItem

    dropped = 0
    ordered = sorted(positions)
    for i in range(0, len(ordered), DELETE_BATCH):
        batch = ordered[i:i + DELETE_BATCH]
        _total, per_model = ReleaseItem.objects.filter(release=release, split="test", position__in=batch).delete()
        dropped += per_model.get(ReleaseItem._meta.label, 0)
    if dropped:
        report.add("model_captions_out_of_test", f"{dropped} model-generated caption(s) of test images were left "
                   "out: model captions are never test references (a captioner would be scored against model "
                   "outputs).", captions=dropped)
    return dropped


__all__ = ["generated", "report_left_out", "drop_from_test"]
