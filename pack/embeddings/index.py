"""FAISS indexes per collection, model and target (images or captions), built from the stored vectors and saved
to storage, and the search every "like this" page uses.

``index_build`` streams the stored vectors in chunks (a collection larger than memory builds from the database,
training an IVF index on a sample), saves the serialised index to Django's storage and records a VectorIndex
row. ``index_search`` uses the saved index while it covers every stored vector; when vectors were added since
(or no index was built yet) it searches the stored vectors exactly, in chunks, so a result is never stale.
"""
from __future__ import annotations

import tempfile
import threading

import numpy as np

from .. import PackError
from .store import from_bytes

CHUNK = 5000
TRAIN_SAMPLE = 100_000
_cache: dict[tuple, object] = {}
_lock = threading.Lock()


def _image_rows(collection, model):
    from ..models import ImageEmbedding

    return (ImageEmbedding.objects.filter(model=model, collection=collection, error="")
            .order_by("image_id").values_list("image_id", "vector"))


def _caption_hashes(collection):
    from curation.models import Caption

    return Caption.objects.filter(image__collection=collection).order_by("pk").values_list("pk", "text_hash")


def stored_count(collection, model, target: str) -> int:
    from ..models import TextEmbedding

    if target == "image":
        return _image_rows(collection, model).count()
    hashes = _caption_hashes(collection).values("text_hash")
    present = TextEmbedding.objects.filter(encoder=model.key, text_sha256__in=hashes).values("text_sha256")
    return _caption_hashes(collection).filter(text_hash__in=present).count()


def stored_chunks(collection, model, target: str, chunk: int = CHUNK):
    """(ids int64 [m], vectors float32 [m, dim]) of the stored vectors, a chunk at a time."""
    from .store import stored_text_vectors

    if target == "image":
        ids, vectors = [], []
        for image_id, raw in _image_rows(collection, model).iterator(chunk_size=chunk):
            ids.append(image_id)
            vectors.append(from_bytes(raw))
            if len(ids) >= chunk:
                yield np.asarray(ids, dtype=np.int64), np.stack(vectors)
                ids, vectors = [], []
        if ids:
            yield np.asarray(ids, dtype=np.int64), np.stack(vectors)
        return
    rows = []
    for pk, h in _caption_hashes(collection).iterator(chunk_size=chunk):
        rows.append((pk, h))
        if len(rows) >= chunk:
            yield from _caption_block(model, rows, stored_text_vectors)
            rows = []
    if rows:
        yield from _caption_block(model, rows, stored_text_vectors)


def _caption_block(model, rows, lookup):
    vectors = lookup(model.key, {h for _, h in rows})
    found = [(pk, vectors[h]) for pk, h in rows if h in vectors]
    if found:
        yield np.asarray([pk for pk, _ in found], dtype=np.int64), np.stack([v for _, v in found])


def _no_vectors(collection, model, target: str) -> PackError:
    what = "images" if target == "image" else "captions"
    return PackError(f"No {what} of collection {collection.name!r} have embeddings by {model.name!r} yet: run "
                     f"Embed on the collection page (or `manage.py embed {collection.pk} --model {model.name}`) "
                     f"first.", code="no_embeddings")


def _sample(collection, model, target: str, total: int) -> np.ndarray | None:
    """Up to TRAIN_SAMPLE vectors spread over the collection (every n-th), for IVF training."""
    if total <= TRAIN_SAMPLE:
        return None
    step = max(1, total // TRAIN_SAMPLE)
    picked = []
    for _, vectors in stored_chunks(collection, model, target):
        picked.append(vectors[::step])
    return np.concatenate(picked)[:TRAIN_SAMPLE]


def index_build(*, collection, model, target: str, progress=None):
    """Build and save the index of the stored vectors; the VectorIndex row."""
    from django.core.files import File

    from ..models import VectorIndex
    from . import ann

    total = stored_count(collection, model, target)
    if total == 0:
        raise _no_vectors(collection, model, target)
    dim = next(stored_chunks(collection, model, target, chunk=1))[1].shape[1]
    params = ann.choose(total, dim)
    index = ann.build(dim, stored_chunks(collection, model, target), total=total,
                      train_vectors=_sample(collection, model, target, total), params=params)
    row = VectorIndex.objects.filter(collection=collection, model=model, target=target).first()
    if row is None:
        row = VectorIndex(collection=collection, model=model, target=target)
    elif row.file:
        row.file.delete(save=False)
    row.count, row.index_type, row.params = int(index.ntotal), str(params.get("kind", "")), params
    # Written through a temporary file: a serialised 1M x 512 index is 2 GB, held once, not three times.
    with tempfile.NamedTemporaryFile(suffix=".faiss") as handle:
        ann.write(index, handle.name)
        del index
        with open(handle.name, "rb") as data:
            row.file.save(f"{collection.pk}-{model.name}-{target}.faiss", File(data), save=False)
    row.save()
    if progress:
        progress(total)
    return row


def _load(row):
    from . import ann

    key = (row.pk, row.file.name, row.count)
    with _lock:
        if key in _cache:
            return _cache[key]
    with row.file.open("rb") as handle:
        index = ann.from_bytes(handle.read())
    with _lock:
        if len(_cache) > 8:
            _cache.clear()
        _cache[key] = index
    return index


def _exact(collection, model, target: str, queries: np.ndarray, k: int):
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    for ids, vectors in stored_chunks(collection, model, target):
        scores = queries @ vectors.T
        best_scores = np.concatenate([best_scores, scores], axis=1)
        best_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        if best_scores.shape[1] > k:
            keep = np.argpartition(-best_scores, k, axis=1)[:, :k]
            best_scores = np.take_along_axis(best_scores, keep, axis=1)
            best_ids = np.take_along_axis(best_ids, keep, axis=1)
    order = np.argsort(-best_scores, axis=1)
    return np.take_along_axis(best_scores, order, axis=1), np.take_along_axis(best_ids, order, axis=1)


def index_search(*, collection, model, target: str, queries: np.ndarray, k: int = 10, exclude_ids=None):
    """[[(id, cosine)], ...] per query row, best first, at most k each (ids in ``exclude_ids`` left out)."""
    from ..models import VectorIndex

    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    total = stored_count(collection, model, target)
    if total == 0:
        raise _no_vectors(collection, model, target)
    exclude = set(exclude_ids or ())
    want = min(total, k + len(exclude))
    row = VectorIndex.objects.filter(collection=collection, model=model, target=target).first()
    if row is not None and row.count == total and row.file:
        from . import ann

        scores, ids = ann.search(_load(row), queries, want, row.params)
    else:
        scores, ids = _exact(collection, model, target, queries, want)
    return [[(int(i), float(s)) for s, i in zip(srow, irow) if i >= 0 and int(i) not in exclude][:k]
            for srow, irow in zip(scores, ids)]


def index_status(collection, model) -> dict:
    from ..models import VectorIndex

    built = {row.target: row for row in VectorIndex.objects.filter(collection=collection, model=model)}
    out = {}
    for target in ("image", "caption"):
        count = stored_count(collection, model, target)
        row = built.get(target)
        out[target] = {"stored": count, "indexed": row.count if row else 0,
                       "index_type": row.index_type if row else "", "current": bool(row and row.count == count)}
    return out
