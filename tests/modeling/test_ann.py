"""Approximate nearest-neighbour indexes (pack/embeddings/ann.py) on clustered synthetic embeddings: IVF
recall against exact search, our ids in and out, serialisation, streamed builds, and clear errors.

The vectors are a mixture of Gaussians on the sphere, each cluster spread along its own few directions plus a
little noise: uniform random vectors have no neighbourhood structure and say nothing about real embeddings."""
import numpy as np
import pytest

from pack.embeddings import ann

DIM = 128


def clustered(n: int, dim: int = DIM, *, clusters: int = 60, rank: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    bases = (rng.standard_normal((clusters, rank, dim)) / np.sqrt(dim)).astype(np.float32)
    which = rng.integers(0, clusters, n)
    x = centres[which] + 0.25 * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    z = 0.7 * rng.standard_normal((n, rank)).astype(np.float32)
    for c in range(clusters):
        rows = which == c
        x[rows] += z[rows] @ bases[c]
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def chunked(ids: np.ndarray, x: np.ndarray, size: int):
    for start in range(0, len(ids), size):
        yield ids[start:start + size], x[start:start + size]


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


@pytest.fixture(scope="module")
def corpus():
    """60,200 vectors: 60,000 indexed (ids far from 0..n, as item ids are) and 200 held-out queries."""
    x = clustered(60_200)
    ids = np.arange(60_000, dtype=np.int64) * 7 + 1_000_003
    return ids, x[:60_000], x[60_000:]


@pytest.fixture(scope="module")
def ivf(corpus):
    ids, x, _ = corpus
    params = ann.choose(len(x), DIM)
    sample = x[np.random.default_rng(1).choice(len(x), params["train_size"], replace=False)]
    return ann.build(DIM, chunked(ids, x, 10_000), total=len(x), train_vectors=sample), params, sample


@pytest.fixture(scope="module")
def exact(corpus):
    ids, x, _ = corpus
    return ann.build(DIM, [(ids, x)], total=len(x), params={"kind": "flat"})


def test_choose_is_exact_for_small_collections_and_ivf_for_large_ones():
    assert ann.choose(1_000, 512)["kind"] == "flat"
    large = ann.choose(1_000_000, 512)
    assert large["kind"] == "ivf" and large["nlist"] == ann.NLIST_CAP and 16 <= large["nprobe"] <= 128
    assert large["train_size"] >= 39 * large["nlist"]


def test_ivf_reaches_recall_at_10_of_095_against_exact_search(corpus, ivf, exact):
    _, _, queries = corpus
    index, params, _ = ivf
    _, truth = ann.search(exact, queries, 10)
    scores, found = ann.search(index, queries, 10)
    assert params["kind"] == "ivf"
    assert recall_at(found, truth) >= 0.95
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first


def test_nprobe_from_params_is_honoured(corpus, ivf, exact):
    _, _, queries = corpus
    index, params, _ = ivf
    _, truth = ann.search(exact, queries, 10)
    _, one_list = ann.search(index, queries, 10, {"nprobe": 1})
    _, every_list = ann.search(index, queries, 10, {"nprobe": params["nlist"]})
    assert recall_at(one_list, truth) < 0.9
    assert recall_at(every_list, truth) == 1.0


def test_searching_with_an_indexed_vector_answers_its_own_item_id_with_cosine_one(corpus, ivf, exact):
    ids, x, _ = corpus
    picked = [0, 12_345, 59_999]
    for index in (ivf[0], exact):
        scores, found = ann.search(index, x[picked], 3)
        assert found[:, 0].tolist() == ids[picked].tolist()
        assert np.allclose(scores[:, 0], 1.0, atol=1e-5)


def test_an_index_survives_to_bytes_and_from_bytes_with_its_search_settings(corpus, ivf):
    _, _, queries = corpus
    index = ivf[0]
    copy = ann.from_bytes(ann.to_bytes(index))
    assert copy.ntotal == index.ntotal and copy.nprobe == index.nprobe
    before, after = ann.search(index, queries, 10), ann.search(copy, queries, 10)
    assert np.array_equal(before[1], after[1]) and np.allclose(before[0], after[0])


def test_building_from_chunks_equals_building_at_once(corpus, ivf):
    ids, x, queries = corpus
    index, params, sample = ivf
    at_once = ann.build(DIM, [(ids, x)], total=len(x), train_vectors=sample, params=params)
    assert np.array_equal(ann.search(at_once, queries, 10)[1], ann.search(index, queries, 10)[1])
    small = ann.build(DIM, chunked(ids[:500], x[:500], 64), total=500)
    whole = ann.build(DIM, [(ids[:500], x[:500])], total=500)
    assert np.array_equal(ann.search(small, queries, 5)[1], ann.search(whole, queries, 5)[1])


def test_an_ivf_index_without_a_sample_trains_on_its_first_chunks(corpus):
    ids, x, queries = corpus
    params = {"kind": "ivf", "nlist": 64, "nprobe": 64, "train_size": 3_000}
    index = ann.build(DIM, chunked(ids[:5_000], x[:5_000], 1_000), total=5_000, params=params)
    assert index.ntotal == 5_000
    exact = ann.build(DIM, [(ids[:5_000], x[:5_000])], total=5_000)
    assert np.array_equal(ann.search(index, queries, 10)[1], ann.search(exact, queries, 10)[1])


def test_a_search_for_more_neighbours_than_indexed_fills_with_minus_one():
    x = clustered(3, seed=3)
    index = ann.build(DIM, [(np.array([10, 20, 30]), x)], total=3)
    scores, found = ann.search(index, x[0], 5)
    assert sorted(found[0, :3].tolist()) == [10, 20, 30]
    assert found[0, 3:].tolist() == [-1, -1] and np.all(np.isneginf(scores[0, 3:]))


def test_range_search_finds_planted_near_duplicates_and_only_them():
    x = clustered(2_000, seed=4)
    rng = np.random.default_rng(5)
    twins = x[:20] + 0.02 * rng.standard_normal((20, DIM)).astype(np.float32) / np.sqrt(DIM)
    data = np.concatenate([x, twins])
    ids = np.arange(len(data), dtype=np.int64)
    index = ann.build(DIM, [(ids, data)], total=len(data))
    found = ann.range_search(index, x[:20], 0.99)
    for q, (hit_ids, hit_scores) in enumerate(found):
        assert set(hit_ids.tolist()) == {q, 2_000 + q}
        assert hit_scores[0] >= hit_scores[-1] >= 0.99


def test_nothing_to_index_is_a_clear_error():
    with pytest.raises(ann.AnnError, match="No vectors to index") as caught:
        ann.build(DIM, [], total=0)
    assert caught.value.code == "empty"
    with pytest.raises(ann.AnnError, match="No vectors to index"):
        ann.build(DIM, [(np.zeros(0, dtype=np.int64), np.zeros((0, DIM), dtype=np.float32))], total=10)


def test_vectors_of_the_wrong_dimension_or_too_few_training_vectors_are_clear_errors():
    x = clustered(100, seed=6)
    with pytest.raises(ann.AnnError, match=r"expected \[n, 64\]"):
        ann.build(64, [(np.arange(100), x)], total=100)
    with pytest.raises(ann.AnnError, match="needs at least 256 training vectors"):
        ann.build(DIM, [(np.arange(100), x)], total=100, params={"kind": "ivf", "nlist": 256})


def test_an_unreadable_stored_index_says_rebuild_it():
    with pytest.raises(ann.AnnError, match="rebuild it"):
        ann.from_bytes(b"not an index")


def test_an_hnsw_index_from_params_answers_item_ids_and_honours_ef_search(corpus):
    ids, x, queries = corpus
    index = ann.build(DIM, [(ids[:3_000], x[:3_000])], total=3_000, params={"kind": "hnsw", "M": 16})
    exact = ann.build(DIM, [(ids[:3_000], x[:3_000])], total=3_000)
    _, truth = ann.search(exact, queries, 10)
    assert ann.search(index, x[:1], 1)[1][0, 0] == ids[0]
    assert recall_at(ann.search(index, queries, 10, {"efSearch": 256})[1], truth) >= \
        recall_at(ann.search(index, queries, 10, {"efSearch": 10})[1], truth)
