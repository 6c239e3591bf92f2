"""The frozen rows: one ReleaseItem per chosen caption, with its image's facts, its cleaned text
and its provenance (``build_item``), and the batched write of those rows with the model versions
that scored or made them (``write_items``).
"""
from __future__ import annotations

from . import model_provenance
from . import provenance as prov

WRITE_BATCH = 2000


def clean_text(text: str) -> str:
    """Text PostgreSQL can hold: no NUL, no lone surrogates (other characters are kept; the
    format writers strip what their format cannot hold)."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def build_item(release, position: int, image: dict, chosen: dict, page, *, run, snapshot: list,
               kinds: dict[int, str]):
    """The unsaved ReleaseItem of one chosen caption of ``image`` (``chosen``: the selection's
    entry, with base and released caption, decisions, language, rated ids, verified, rules);
    ``page`` is the PageFacts of the image's page."""
    from releases.models import ReleaseItem

    released = chosen["released"]
    chain = prov.lineage(released["pk"], page.captions)
    decision_entries = [prov.decision_entry(d, snapshot) for d in chosen["decisions"]]
    review_entries = [r for d in chosen["decisions"] for r in page.reviews.get(d["pk"], ())]
    votes = [prov.vote_entry(a, cid, kinds.get(a["task__campaign_id"], ""))
             for cid in chosen["rated"] for _dim, a in page.aggregates.get(cid, ())]
    provenance = prov.build(image=image, caption=released, chain=chain, run=run, decisions=decision_entries,
                            reviews=review_entries, votes=votes, rules=chosen["rules"])
    return ReleaseItem(
        release=release, position=position, split="train", image_id=image["pk"],
        image_sha256=image["sha256"] or "", image_file=image["file"] or "", image_format=image["format"] or "",
        width=image["width"], height=image["height"], license=image["license"] or "",
        credit=image["credit"] or "", external_id=image["external_id"] or "", caption_id=released["pk"],
        text=clean_text(released["text"]), language=chosen["language"] or "", human_verified=chosen["verified"],
        provenance=provenance)


def write_items(items: list, run=None) -> None:
    """Write ``items`` in batches of ``WRITE_BATCH``, with their model provenance added."""
    from releases.models import ReleaseItem

    ReleaseItem.objects.bulk_create(model_provenance.annotate(items, run), batch_size=WRITE_BATCH)


__all__ = ["WRITE_BATCH", "clean_text", "build_item", "write_items"]
