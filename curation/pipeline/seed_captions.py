"""Caption seeds as captions (seed 001, Section 2): the seeds a run's caption_seeds step found in a
description it kept become child captions of that description, origin "seed", text the seed as a short
caption ("person slays dragon"), so that a release can ship them (``origins`` with "seed") instead of or
beside the full descriptions (releases/selection.py).

The executor calls ``save_chunk_seeds`` once per chunk. It is idempotent: a seed caption is unique per
description and text (its source names the description, not the run), so a chunk run again, a reconcile
or a second run over the same descriptions finds the captions already there and adds none. Which seeds a
given run found is recorded by its CaptionSeed rows; a release with that run ships the seed captions that
match them.
"""
from __future__ import annotations

from .seeds import CaptionSeeds, save_seeds

SEED_SOURCE = "caption seeds of #{parent}"  # a seed caption's source: unique per description and text
SEED_LANGUAGE = "en"  # seeds are read from an English parse (translated first where a model is configured)


def seed_text(seed) -> str:
    """A seed as a short caption: ["person", "slays", "dragon", sentence] -> "person slays dragon"
    (underscores of multi-word class words become spaces)."""
    return " ".join(str(part).replace("_", " ").strip() for part in seed[:3] if str(part).strip())


def save_chunk_seeds(run, found: dict[int, list]) -> int:
    """Write the seeds of a chunk's descriptions (``found``: caption id -> details["seeds"]) as CaptionSeed
    rows of ``run`` and as child captions of the descriptions (origin "seed", language English, metadata
    {"run", "filter", "seed": [subject, relation, object]}: the run that first made it). Rows and
    captions already there are left alone. Returns how many seed captions were given."""
    from ..models import Caption, text_hash

    run_id = getattr(run, "pk", run)
    for caption_id, seeds in found.items():
        save_seeds(run_id, caption_id, seeds)
    images = dict(Caption.objects.filter(pk__in=list(found)).values_list("pk", "image_id"))
    children, seen = [], set()
    for caption_id, seeds in found.items():
        if caption_id not in images:
            continue
        for seed in seeds or []:
            text = seed_text(seed)[:1000]
            if not text or (caption_id, text) in seen:
                continue
            seen.add((caption_id, text))
            children.append(Caption(
                image_id=images[caption_id], text=text, text_hash=text_hash(text), language=SEED_LANGUAGE,
                origin=Caption.Origin.SEED, parent_id=caption_id, source=SEED_SOURCE.format(parent=caption_id),
                metadata={"run": run_id, "filter": CaptionSeeds.name, "seed": [str(p)[:200] for p in seed[:3]]}))
    Caption.objects.bulk_create(children, batch_size=1000, ignore_conflicts=True)
    return len(children)


__all__ = ["SEED_SOURCE", "SEED_LANGUAGE", "seed_text", "save_chunk_seeds"]
