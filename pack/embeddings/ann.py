"""Approximate nearest-neighbour indexes (FAISS) over stored embeddings; pure: no database, no Django.

Vectors are L2-normalised float32, so the inner product is the cosine and every score returned is a cosine.
Ids are our item ids (int64), stored in the index (IndexIDMap2, or the IVF lists' own ids), so a search
answers item ids directly.

``choose(n, dim)`` picks the index by size. Measured on the 2-core build machine (benchmarks/embed.py, dim 512,
clustered synthetic vectors, single queries, k=10):
- exact (IndexFlatIP) below EXACT_BELOW: a single query scans n x 2 KiB, a few ms at 50k, no training;
- IVF-Flat above: nlist = 4 sqrt(n) capped at NLIST_CAP; the cap keeps a 1M build near a minute (k-means on
  40 x nlist vectors, then one assignment per vector). nlist 4096 cost twice the build time at 1M for no
  better latency at equal recall. nprobe = nlist / 16 (16-128): recall@10 0.97 at 1M;
- HNSW is available through ``params`` but never chosen: on 2 cores it builds far slower (HNSW32, 100k x 512:
  24 s against IVF's 5 s, and it grows faster than linearly) and needed efSearch 128 for recall@10 0.96.

``build`` takes chunks (ids, vectors) so an index builds from storage without holding the collection twice.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterable

import numpy as np

EXACT_BELOW = 50_000
NLIST_CAP = 2048
TRAIN_PER_LIST = 40  # FAISS warns below 39 training vectors per list


class AnnError(Exception):
    """A message a person can act on, and a code for the API."""

    def __init__(self, message: str, code: str = "invalid"):
        super().__init__(message)
        self.message, self.code = message, code

    def __str__(self):
        return self.message


@contextmanager
def faiss_threads(n: int):
    """Run a block with FAISS limited to n OpenMP threads (0: leave as is, OpenMP's default being the machine's
    cores); the same convention as modeling.threads.torch_threads."""
    import faiss

    n = int(n or 0)
    before = faiss.omp_get_max_threads()
    if n > 0 and n != before:
        faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        if n > 0 and faiss.omp_get_max_threads() != before:
            faiss.omp_set_num_threads(before)


def choose(n: int, dim: int) -> dict:
    """The index parameters for n vectors of dimension dim (see the module docstring for the measurements)."""
    if n <= 0 or dim <= 0:
        raise AnnError(f"No vectors to index (n={n}, dim={dim}): compute the embeddings first.", code="empty")
    if n < EXACT_BELOW:
        return {"kind": "flat", "dim": dim}
    nlist = min(NLIST_CAP, int(4 * math.sqrt(n)))
    return {"kind": "ivf", "dim": dim, "nlist": nlist, "nprobe": max(16, min(128, nlist // 16)),
            "train_size": min(n, TRAIN_PER_LIST * nlist)}


def _matrix(vectors, dim: int, what: str) -> np.ndarray:
    """A C-contiguous float32 copy [m, dim], rows L2-normalised (a zero row stays zero)."""
    import faiss

    x = np.array(vectors, dtype=np.float32, order="C", copy=True)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2 or x.shape[1] != dim:
        raise AnnError(f"{what} have shape {tuple(x.shape)}; expected [n, {dim}].", code="shape")
    faiss.normalize_L2(x)
    return x


def _empty_index(params: dict):
    import faiss

    dim, kind = int(params["dim"]), params["kind"]
    if kind == "flat":
        return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    if kind == "ivf":
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, int(params["nlist"]), faiss.METRIC_INNER_PRODUCT)
        index.cp.spherical = True  # centroids on the sphere, like the vectors: cells by cosine
        index.nprobe = int(params.get("nprobe", 16))  # serialised with the index: the default for later searches
        return index
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, int(params.get("M", 32)), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(params.get("efConstruction", 40))
        index.hnsw.efSearch = int(params.get("efSearch", 64))
        return faiss.IndexIDMap2(index)
    raise AnnError(f"Unknown index kind {kind!r}: use flat, ivf or hnsw.", code="unknown_kind")


def build(dim: int, chunks: Iterable[tuple[np.ndarray, np.ndarray]], *, total: int, train_vectors=None,
          params: dict | None = None, threads: int = 0):
    """An index of every (ids int64 [m], vectors float32 [m, dim]) chunk, built chunk by chunk.

    ``total`` (the number of vectors expected) picks the parameters unless ``params`` is given. An IVF index
    trains on ``train_vectors``, a random sample of the collection (``choose(...)["train_size"]`` of them);
    without one it trains on the first chunks, which is only representative if storage order is not by topic.
    """
    params = dict(params or choose(total, dim))
    params["dim"] = dim
    index = _empty_index(params)
    pending: list[tuple[np.ndarray, np.ndarray]] = []  # chunks held back until the untrained index can train
    with faiss_threads(threads):
        if not index.is_trained and train_vectors is not None:
            _train(index, _matrix(train_vectors, dim, "Training vectors"), params)
        added = 0
        for ids, vectors in chunks:
            ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
            x = _matrix(vectors, dim, "Vectors")
            if len(ids) != len(x):
                raise AnnError(f"A chunk has {len(ids)} ids for {len(x)} vectors.", code="shape")
            if not len(ids):
                continue
            if index.is_trained:
                index.add_with_ids(x, ids)
            else:
                pending.append((ids, x))
                if sum(len(p) for p, _ in pending) >= _train_size(params):
                    _flush(index, pending, params)
            added += len(ids)
        if pending:
            _flush(index, pending, params)
    if not added:
        raise AnnError("No vectors to index: the collection has no stored embeddings for this model yet.",
                       code="empty")
    return index


def _train_size(params: dict) -> int:
    return int(params.get("train_size") or TRAIN_PER_LIST * int(params.get("nlist", 1)))


def _train(index, sample: np.ndarray, params: dict) -> None:
    nlist = int(params.get("nlist", 1))
    if len(sample) < nlist:
        raise AnnError(f"An IVF index of {nlist} lists needs at least {nlist} training vectors (got {len(sample)}); "
                       f"give more, or use an exact index for a collection this small.", code="too_few")
    index.train(sample)


def _flush(index, pending: list, params: dict) -> None:
    _train(index, np.concatenate([x for _, x in pending]), params)
    while pending:
        ids, x = pending.pop(0)
        index.add_with_ids(x, ids)


def _search_parameters(index, params: dict | None):
    import faiss

    params = params or {}
    if "nprobe" in params:
        try:
            faiss.extract_index_ivf(index)
            return faiss.SearchParametersIVF(nprobe=int(params["nprobe"]))
        except RuntimeError:
            pass
    if "efSearch" in params and isinstance(faiss.downcast_index(getattr(index, "index", index)), faiss.IndexHNSW):
        return faiss.SearchParametersHNSW(efSearch=int(params["efSearch"]))
    return None


def search(index, queries, k: int, params: dict | None = None, *, threads: int = 0):
    """(scores float32 [q, k], ids int64 [q, k]), best first; where the index has fewer than k vectors the
    missing places have id -1 and score -inf. ``params`` may set nprobe (IVF) or efSearch (HNSW)."""
    x = _matrix(queries, index.d, "Queries")
    k = int(k)
    if k <= 0:
        raise AnnError("k must be at least 1.", code="invalid")
    with faiss_threads(threads):
        scores, ids = index.search(x, k, params=_search_parameters(index, params))
    scores[ids < 0] = -np.inf
    return scores, ids


def range_search(index, queries, min_similarity: float, params: dict | None = None, *,
                 threads: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(ids, scores)] per query: every indexed vector with cosine >= min_similarity (exact for a flat index;
    within the probed lists for IVF), best first. The query's own id is among them when it is indexed."""
    x = _matrix(queries, index.d, "Queries")
    # FAISS keeps inner products strictly above the radius
    radius = float(np.nextafter(np.float32(min_similarity), np.float32(-np.inf)))
    with faiss_threads(threads):
        try:
            lims, scores, ids = index.range_search(x, radius, params=_search_parameters(index, params))
        except RuntimeError as exc:
            raise AnnError(f"This index does not support range search: {str(exc)[:200]}", code="unsupported") from None
    out = []
    for q in range(len(x)):
        s, i = scores[lims[q]:lims[q + 1]], ids[lims[q]:lims[q + 1]]
        order = np.argsort(-s, kind="stable")
        out.append((i[order], s[order]))
    return out


def write(index, path: str) -> None:
    """The index into a file (what storage keeps), without an in-memory copy of its bytes."""
    import faiss

    faiss.write_index(index, path)


def to_bytes(index) -> bytes:
    import faiss

    return faiss.serialize_index(index).tobytes()


def from_bytes(data: bytes):
    import faiss

    if not data:
        raise AnnError("The stored index is empty: rebuild it.", code="broken")
    try:
        return faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    except RuntimeError as exc:
        raise AnnError(f"The stored index cannot be read ({str(exc)[:200]}): rebuild it.", code="broken") from None
