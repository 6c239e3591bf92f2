"""Collections for the search tests: captions written here (pairs of paraphrases among unrelated ones), images
of random noise (distinct vectors even under a random-weight model), and a run with a duplicate-clusters step
whose decisions follow the semantic-duplicates filters' contract."""
from __future__ import annotations

import hashlib
import io

import numpy as np
from django.core.files.base import ContentFile
from PIL import Image as PILImage

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image

CAPTIONS = [
    "a dog runs on the beach",
    "a puppy is running along the seashore",
    "a red car parked near a building",
    "an automobile parked beside an office block",
    "a plate of pasta on a wooden table",
    "a bowl of noodles served on a kitchen table",
    "snowy mountains under a clear blue sky",
    "children play football in a park",
]


def noise_jpeg(seed: int, size: int = 48) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)
    out = io.BytesIO()
    PILImage.fromarray(pixels).save(out, "JPEG", quality=92)
    return out.getvalue()


def same_pixels_png(jpeg: bytes) -> bytes:
    """Other bytes (another sha256), the very same decoded pixels."""
    out = io.BytesIO()
    PILImage.open(io.BytesIO(jpeg)).convert("RGB").save(out, "PNG")
    return out.getvalue()


def make_image(collection, external_id: str, data: bytes, fmt: str) -> Image:
    image = Image(collection=collection, format=fmt, status=Image.Status.READY, external_id=external_id,
                  sha256=hashlib.sha256(data).hexdigest(), file_size=len(data))
    image.file.save(f"{external_id}.{fmt.lower()}", ContentFile(data), save=True)
    return image


def caption_collection(name: str = "Beach and city", texts=CAPTIONS, copies: int = 0) -> Collection:
    """One noise image per caption (image i has seed i); ``copies`` more images with image 0's pixels as PNGs."""
    collection = Collection.objects.create(name=name, language="en")
    for i, text in enumerate(texts):
        image = make_image(collection, f"img-{i}", noise_jpeg(i), "JPEG")
        Caption.objects.create(image=image, text=text, origin=Caption.Origin.DATASET)
    for j in range(copies):
        image = make_image(collection, f"copy-{j}", same_pixels_png(noise_jpeg(0)), "PNG")
        Caption.objects.create(image=image, text=f"the same photo again ({j})", origin=Caption.Origin.DATASET)
    return collection


def captions_of(collection) -> list[Caption]:
    return list(Caption.objects.filter(image__collection=collection).order_by("pk"))


def embed_captions(collection, model) -> None:
    from pack.embeddings import caption_vectors

    caption_vectors(model, [c.pk for c in captions_of(collection)], compute=True)


def embed_images(collection, model) -> None:
    from pack.embeddings import image_vectors

    image_vectors(model, list(collection.images.order_by("pk").values_list("pk", flat=True)), compute=True)


def cluster_run(collection, groups: list[list[Caption]], user=None, model_key: str = "minilm-l6-v2@test") -> FilterRun:
    """A finished run whose only step is ``semantic_duplicates``, with one decision per caption: the members of
    each group share a cluster (the first member kept, the others dropped), the rest are kept alone."""
    snapshot = [{"filter": "semantic_duplicates", "version": 1, "label": "Semantic duplicates", "target": "caption",
                 "params": {"max_distance": 0.1}, "transform": False, "run_level": True, "enabled": True}]
    run = FilterRun.objects.create(collection=collection, snapshot=snapshot, status=FilterRun.Status.DONE,
                                   created_by=user)
    grouped = {c.pk for group in groups for c in group}
    rows = []
    for group in groups:
        ids = [c.pk for c in group]
        details = {"cluster": min(ids), "size": len(ids), "members": ids, "kept_id": ids[0], "similarity": 0.93,
                   "model": model_key}
        for i, caption in enumerate(group):
            rows.append(FilterDecision(run=run, step=0, filter_name="semantic_duplicates", image_id=caption.image_id,
                                       caption=caption, outcome="keep" if i == 0 else "drop", score=0.93,
                                       reason="" if i == 0 else "semantic_duplicate", details=details))
    for caption in captions_of(collection):
        if caption.pk not in grouped:
            rows.append(FilterDecision(run=run, step=0, filter_name="semantic_duplicates", image_id=caption.image_id,
                                       caption=caption, outcome="keep", reason="unique", details={}))
    FilterDecision.objects.bulk_create(rows)
    return run
