"""Embeddings as data: image vectors in ImageEmbedding (one row per image and model), text vectors in
TextEmbedding (one row per distinct text and model key: a caption's vector is its text's, so identical texts
are encoded once). Vectors are float32 little-endian and L2-normalised, so a dot product is a cosine.

``image_vectors`` and ``caption_vectors`` read what is stored and, with ``compute=True``, encode and store what
is missing (bulk inserts that ignore conflicts: two workers, or a re-delivered task, never write a row twice).
An image that cannot be read or decoded gets a row with ``error`` set and no vector: it is reported, skipped
on the next run, and never stops the others.
"""
from __future__ import annotations

import hashlib
import io

import numpy as np

LOOKUP_BATCH = 2000
DECODE_MAX_SIDE = 512  # JPEG draft mode decodes at a reduced scale at least this large (models want 224-448)


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(raw) -> np.ndarray:
    return np.frombuffer(bytes(raw), dtype="<f4")


def text_sha256(text: str) -> str:
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


def open_image(file_name: str):
    """The decoded RGB image of a file in Django's default storage (JPEGs decoded at a reduced scale)."""
    from django.core.files.storage import default_storage
    from PIL import Image as PILImage

    with default_storage.open(file_name, "rb") as handle:
        data = handle.read()
    image = PILImage.open(io.BytesIO(data))
    if image.format == "JPEG":
        image.draft("RGB", (DECODE_MAX_SIDE, DECODE_MAX_SIDE))
    return image.convert("RGB")


def decode_all(rows, threads: int = 4) -> tuple[list, dict[int, str]]:
    """[(image_id, PIL image)] of ``rows`` [(image_id, file_name)], decoded on a few threads (PIL releases the
    GIL while decoding), and {image_id: error} of those that could not be read."""
    from concurrent.futures import ThreadPoolExecutor

    def one(row):
        image_id, name = row
        if not name:
            return image_id, None, "no image file (not downloaded, or failed to download)"
        try:
            return image_id, open_image(name), ""
        except Exception as exc:  # noqa: BLE001 - any unreadable file is reported, not raised
            return image_id, None, f"cannot decode: {type(exc).__name__}: {str(exc)[:200]}"

    decoded, errors = [], {}
    rows = list(rows)
    if len(rows) > 1 and threads > 1:
        with ThreadPoolExecutor(max_workers=min(threads, len(rows))) as pool:
            results = list(pool.map(one, rows))
    else:
        results = [one(r) for r in rows]
    for image_id, image, error in results:
        if error:
            errors[image_id] = error
        else:
            decoded.append((image_id, image))
    return decoded, errors


def stored_image_vectors(model, image_ids) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    from ..models import ImageEmbedding

    vectors, errors = {}, {}
    ids = list(image_ids)
    for start in range(0, len(ids), LOOKUP_BATCH):
        rows = ImageEmbedding.objects.filter(model=model, image_id__in=ids[start:start + LOOKUP_BATCH])
        for image_id, raw, error in rows.values_list("image_id", "vector", "error"):
            if error:
                errors[image_id] = error
            else:
                vectors[image_id] = from_bytes(raw)
    return vectors, errors


def image_vectors(model, image_ids, *, compute: bool = True, encoder=None, batch_size: int | None = None,
                  progress=None) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """({image_id: vector}, {image_id: error}) for the images; missing ones are encoded and stored when
    ``compute``. ``progress(n)`` is called with the number of images finished after each batch."""
    from django.conf import settings

    from curation.models import Image

    vectors, errors = stored_image_vectors(model, image_ids)
    missing = [i for i in dict.fromkeys(image_ids) if i not in vectors and i not in errors]
    if not missing or not compute:
        return vectors, errors
    import pack

    encoder = encoder or pack.load(model)
    size = batch_size or settings.EMBED_BATCH_SIZE
    for start in range(0, len(missing), size):
        block = missing[start:start + size]
        rows = Image.objects.filter(pk__in=block).values_list("pk", "file", "collection_id")
        files = {pk: (name, collection) for pk, name, collection in rows}
        decoded, failed = decode_all([(pk, files[pk][0]) for pk in block if pk in files])
        fresh = {}
        if decoded:
            encoded = encoder.encode_images([im for _, im in decoded], batch_size=size)
            fresh = {image_id: vec for (image_id, _), vec in zip(decoded, encoded)}
        save_image_vectors(model, fresh, failed, {pk: c for pk, (_, c) in files.items()})
        vectors.update(fresh)
        errors.update(failed)
        if progress:
            progress(len(block))
    return vectors, errors


def save_image_vectors(model, vectors: dict[int, np.ndarray], errors: dict[int, str], collections: dict[int, int]):
    from ..models import ImageEmbedding

    rows = [ImageEmbedding(model=model, image_id=i, collection_id=collections[i], dim=len(v), vector=to_bytes(v))
            for i, v in vectors.items() if i in collections]
    rows += [ImageEmbedding(model=model, image_id=i, collection_id=collections[i], error=e[:300])
             for i, e in errors.items() if i in collections]
    ImageEmbedding.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)


def stored_text_vectors(key: str, hashes) -> dict[str, np.ndarray]:
    from ..models import TextEmbedding

    found = {}
    hashes = list(hashes)
    for start in range(0, len(hashes), LOOKUP_BATCH):
        rows = TextEmbedding.objects.filter(encoder=key, text_sha256__in=hashes[start:start + LOOKUP_BATCH])
        for h, raw in rows.values_list("text_sha256", "vector"):
            found[h] = from_bytes(raw)
    return found


def text_vectors(model, texts: list[str], *, encoder=None, batch_size: int = 256, progress=None) -> np.ndarray:
    """[len(texts), dim] vectors of the texts by the model's text tower (or sentence encoder), from the cache
    where stored; the rest encoded once per distinct text and stored."""
    from ..models import TextEmbedding

    texts = [t or "" for t in texts]
    if not texts:
        return np.zeros((0, model.embedding_dim), dtype=np.float32)
    hashes = [text_sha256(t) for t in texts]
    vectors = stored_text_vectors(model.key, set(hashes))
    missing: dict[str, str] = {}
    for h, t in zip(hashes, texts):
        if h not in vectors:
            missing.setdefault(h, t)
    if missing:
        import pack

        encoder = encoder or pack.load(model)
        order = list(missing)
        for start in range(0, len(order), batch_size * 4):
            block = order[start:start + batch_size * 4]
            encoded = encoder.encode_texts([missing[h] for h in block], batch_size=batch_size)
            fresh = dict(zip(block, encoded))
            TextEmbedding.objects.bulk_create(
                [TextEmbedding(encoder=model.key, text_sha256=h, dim=len(v), vector=to_bytes(v)) for h, v in fresh.items()],
                batch_size=1000, ignore_conflicts=True)
            vectors.update(fresh)
            if progress:
                progress(len(block))
    return np.stack([vectors[h] for h in hashes]).astype(np.float32)


def caption_vectors(model, caption_ids, *, compute: bool = True, encoder=None) -> dict[int, np.ndarray]:
    """{caption_id: vector} (the vector of the caption's text)."""
    from curation.models import Caption

    ids = list(dict.fromkeys(caption_ids))
    texts: dict[int, tuple[str, str]] = {}
    for start in range(0, len(ids), LOOKUP_BATCH):
        for pk, text, h in Caption.objects.filter(pk__in=ids[start:start + LOOKUP_BATCH]).values_list(
                "pk", "text", "text_hash"):
            texts[pk] = (text, h)
    if compute:
        order = list(texts)
        matrix = text_vectors(model, [texts[pk][0] for pk in order], encoder=encoder)
        return dict(zip(order, matrix))
    stored = stored_text_vectors(model.key, {h for _, h in texts.values()})
    return {pk: stored[h] for pk, (_, h) in texts.items() if h in stored}
