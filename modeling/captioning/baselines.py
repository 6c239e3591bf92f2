"""Trivial captioners a trained captioner must beat, scored on the same test images with the same metrics:

- ``most_frequent``: the most frequent training caption (after tokenization), the same text for every image;
- ``retrieval``: nearest-neighbour retrieval over the same image features the model reads (Devlin et al. 2015,
  "Exploring Nearest Neighbor Approaches for Image Captioning"): for a test image take the k nearest training
  images by cosine similarity (FAISS, exact inner product on L2-normalised vectors), pool their captions, and
  output the consensus caption, the candidate with the highest mean similarity to the other candidates. The
  similarity is CIDEr's own: the cosine of TF-IDF weighted n-gram vectors (n = 1..4), averaged over n (Vedantam
  et al. 2015), with document frequencies from the retrieved training captions;
- ``source_text``: where the release's items were transformed from a raw text (alt text, a translation source), the
  raw text itself, on the images that have one.

Nothing here knows about runs or models: features, captions and references in, texts out.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from .vocab import tokenize

DEFAULT_K = 30  # Devlin et al. tuned k on a validation split; 30 neighbours keep 100-150 candidates at 5 captions
MAX_CANDIDATES = 150
NGRAMS = 4
HASH_WIDTH = 2 ** 20


def most_frequent_caption(train_texts: list[str]) -> str:
    """The training caption that occurs most often once tokenized (ties: the one seen first)."""
    counts = Counter(" ".join(tokenize(t)) for t in train_texts)
    counts.pop("", None)
    if not counts:
        return ""
    best = max(counts.values())
    return next(key for key in counts if counts[key] == best)


def normalise(features) -> np.ndarray:
    x = np.ascontiguousarray(np.asarray(features, dtype=np.float32))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def neighbourhood(k: int, train_images: int) -> int:
    """The k actually used: at most sqrt(training images), so that on a small training split the neighbourhood stays
    local (k = 30 of 36 images would make retrieval the consensus of the whole split, the most frequent caption
    again); 30 from 900 training images on."""
    return max(1, min(int(k), int(math.sqrt(train_images)), train_images))


def nearest_images(train_features, query_features, k: int) -> np.ndarray:
    """[Q, k] indices of the k nearest training vectors by cosine (exact search with FAISS)."""
    import faiss

    train, query = normalise(train_features), normalise(query_features)
    index = faiss.IndexFlatIP(train.shape[1])
    index.add(train)
    _, found = index.search(query, min(k, train.shape[0]))
    return found


def ngram_vectors(texts: list[str]):
    """Sparse [len(texts), 4 * 2^20]: per n = 1..4 the L2-normalised TF-IDF n-gram vector scaled by 1/2, side by
    side, so that the dot product of two rows is the mean over n of their TF-IDF cosines (CIDEr's similarity,
    without its length penalty). Document frequencies from ``texts`` themselves (the retrieved captions). The
    n-grams are hashed into 2^20 buckets per order: no vocabulary of millions of n-grams is built (10x faster on
    100,000 captions, benchmarks/captioner_baselines.py), and collisions are rare at that width."""
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.preprocessing import normalize

    joined = [" ".join(tokenize(t)) for t in texts]
    blocks = []
    for n in range(1, NGRAMS + 1):
        counts = HashingVectorizer(token_pattern=r"\S+", lowercase=False, ngram_range=(n, n), n_features=HASH_WIDTH,
                                   alternate_sign=False, norm=None).transform(joined).tocsr()
        df = np.bincount(counts.indices, minlength=HASH_WIDTH)
        idf = np.log((1 + counts.shape[0]) / (1 + df)) + 1  # scikit-learn's smoothed IDF
        blocks.append(normalize(counts.multiply(idf).tocsr()) / np.sqrt(NGRAMS))
    return hstack(blocks).tocsr()


def consensus(rows: list[int], texts: list[str], vectors) -> str:
    """Of the candidate captions ``rows`` (indices into ``texts``/``vectors``), the one whose mean similarity to
    the other candidates is highest (Devlin et al. 2015)."""
    from scipy.sparse import csr_matrix

    if not rows:
        return ""
    if len(rows) == 1:
        return texts[rows[0]]
    block = vectors[rows]
    # Only the columns these candidates use (a few thousand of millions): scipy's product allocates per column.
    columns, compact = np.unique(block.indices, return_inverse=True)
    block = csr_matrix((block.data, compact.ravel(), block.indptr), shape=(len(rows), len(columns)))
    sims = (block @ block.T).toarray()
    np.fill_diagonal(sims, 0.0)
    return texts[rows[int(np.argmax(sims.sum(axis=1)))]]


def retrieval_captions(train_features, train_captions: list[list[str]], query_features, k: int = DEFAULT_K,
                       max_candidates: int = MAX_CANDIDATES) -> list[str]:
    """One consensus caption per query image from the captions of its k nearest training images."""
    if len(train_captions) == 0 or len(query_features) == 0:
        return [""] * len(query_features)
    found = nearest_images(train_features, query_features, neighbourhood(k, len(train_captions)))
    starts = np.cumsum([0] + [len(c) for c in train_captions])
    pools = [[r for i in row if i >= 0 for r in range(starts[i], starts[i + 1])][:max_candidates] for row in found]
    # Only the captions some query retrieved are vectorised (their document frequencies among themselves, as CIDEr
    # takes them from the captions it scores), so the cost follows the test split, not the training set.
    used = sorted({r for pool in pools for r in pool})
    position = {r: n for n, r in enumerate(used)}
    flat = [t for captions in train_captions for t in captions]
    texts = [flat[r] for r in used]
    vectors = ngram_vectors(texts)
    return [consensus([position[r] for r in pool], texts, vectors) for pool in pools]


def skip_reason(train_images: int, train_features, query_features) -> str:
    """Why retrieval cannot run on this split ("" when it can)."""
    if train_images < 2:
        return (f"the train split has {train_images} image(s): retrieval needs at least 2 training images to "
                "choose among")
    if train_features is None or query_features is None:
        return "no image features: the model's encoder gave no vectors to search"
    if len(query_features) == 0:
        return "the test split has no images"
    return ""
