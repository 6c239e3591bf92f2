"""The last pass of a freeze, over the written items in position order: the counts per split,
the content hash (sha256 of the canonical manifest, ``provenance.header_line`` and
``item_line``) and the dataset card (``card``), set on the release (the caller saves it).
"""
from __future__ import annotations

import hashlib

from . import provenance as prov
from .items import WRITE_BATCH
from .splits import SPLITS


def summarise(release, progress=None) -> None:
    """One pass in position order: counts, content hash, card statistics."""
    from releases.models import ReleaseItem

    from .card import CardStats, dataset_card

    digest = hashlib.sha256(prov.header_line(release.config))
    stats = CardStats()
    counts = {s: {"images": 0, "captions": 0} for s in SPLITS}
    total_images = 0
    last_image = {s: None for s in SPLITS}
    last_any = None
    done = 0
    total = release.items_total
    for row in (ReleaseItem.objects.filter(release=release).order_by("position")
                .values_list(*prov.ITEM_FIELDS).iterator(chunk_size=WRITE_BATCH)):
        digest.update(prov.item_line(row))
        split, provenance = row[1], row[-1]
        image_key = provenance.get("image")
        counts[split]["captions"] += 1
        if last_image[split] != image_key:
            last_image[split] = image_key
            counts[split]["images"] += 1
        if last_any != image_key:
            last_any = image_key
            total_images += 1
        stats.add(split, row[10], row[11], str(image_key), row[7], row[8], row[12])
        done += 1
        if progress and done % 20000 == 0:
            progress(done, total)
    counts["total"] = {"images": total_images, "captions": done}
    release.counts = counts
    release.content_hash = digest.hexdigest()
    release.card = dataset_card(release, stats)


__all__ = ["summarise"]
