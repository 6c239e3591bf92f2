"""What ``lda_topics`` reads of a run: its comments' n-grams (``ngrams_of_texts``), and in one streamed pass
(``RunCorpus``) each n-gram's counts over the whole run and a seeded sample of at most ``limit`` image documents
to fit the model on.

Memory: the counts grow with the run's distinct n-grams (the language's, not the number of comments), the
sample with ``limit``; nothing else is kept per comment or per image. The sample is the ``limit`` images with
the smallest hash of (seed, image id): the same images whatever order they come in, and every image of a run
that has no more than ``limit``.
"""
from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import groupby, islice

MAX_CHARS = 20_000  # per comment for topic n-grams; the longest AVA comment has 137 words
# Distinct texts whose n-grams a run keeps from its first pass to the next (decide_run): a run with no more
# distinct comments (repeated alt texts, a first collection) is parsed once, as when it was decided in one call.
PARSED_TEXTS = 20_000


class RunCorpus:
    def __init__(self, limit: int | None, seed):
        self.doc_freq: Counter = Counter()  # in how many comments each n-gram occurs
        self.freq: Counter = Counter()  # how often it occurs
        self.comments = 0
        self.images = 0
        self.limit = int(limit) if limit else None  # None: every image
        self.seed = seed
        self._heap: list[tuple] = []  # (-key, image_id, document): the kept images, largest key first
        self._canonical: dict[str, str] = {}  # one string per distinct n-gram, shared by the kept documents

    def add_image(self, image_id: int, comment_ngrams: list[list[str]]) -> None:
        """An image's comments, each as its n-grams (an image comes once, all its comments together)."""
        document: list[str] = []
        for grams in comment_ngrams:
            self.comments += 1
            self.doc_freq.update(set(grams))
            self.freq.update(grams)
            document.extend(grams)
        self.images += 1
        entry = (-_sample_key(self.seed, image_id), image_id)
        if self.limit is not None and len(self._heap) >= self.limit:
            if entry <= self._heap[0][:2]:  # its key is not below the largest kept one
                return
            heapq.heappop(self._heap)
        heapq.heappush(self._heap, (*entry, tuple(self._canonical.setdefault(g, g) for g in document)))

    @property
    def sampled(self) -> bool:
        """Whether some images were left out of the sample."""
        return self.images > len(self._heap)

    def sample(self) -> tuple[list[int], list[tuple[str, ...]]]:
        """The kept images' ids, ascending, and their documents (their comments' n-grams, in order)."""
        kept = sorted((image_id, document) for _, image_id, document in self._heap)
        return [image_id for image_id, _ in kept], [document for _, document in kept]


def _sample_key(seed, image_id: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}:{image_id}".encode(), digest_size=8).digest(), "big")


def image_batches(rows: Iterable[dict], size: int) -> Iterator[list[list[dict]]]:
    """The rows, which come ordered by image id, as lists of about ``size`` rows grouped by image (an image's
    rows never split across lists). Rows out of order would split an image's document: that raises."""
    batch: list[list[dict]] = []
    count, last = 0, None
    for image_id, group in groupby(rows, key=lambda row: row["image_id"]):
        if last is not None and image_id <= last:
            raise ValueError(f"lda_topics: rows must come ordered by image id ({image_id} after {last})")
        last = image_id
        group = list(group)
        if count >= size:
            yield batch
            batch, count = [], 0
        batch.append(group)
        count += len(group)
    if batch:
        yield batch


def ngrams_of_texts(texts: list[str], extract, cache: dict | None = None) -> list[list[str]]:
    """Unigrams + bigrams of each text, each distinct text parsed once (POS only), streamed. ``cache``: the
    n-grams of texts parsed before ({text: n-grams}; the lists are shared, not to be changed), which keeps the
    last PARSED_TEXTS distinct texts."""
    from . import nlp

    texts = [t[:MAX_CHARS] for t in texts]  # spaCy refuses texts over nlp.max_length; comments are far shorter
    grams = {} if cache is None else cache
    new = [t for t in dict.fromkeys(texts) if t not in grams]
    if new:
        pipeline = nlp.load(frozenset({"pos"}))
        for text, doc in zip(new, pipeline.pipe(new, batch_size=256)):
            unigrams, bigrams = extract(doc)
            grams[text] = unigrams + bigrams
    out = [grams[t] for t in texts]
    if cache is not None and len(cache) > PARSED_TEXTS:  # the oldest go first
        for text in list(islice(cache, len(cache) - PARSED_TEXTS)):
            del cache[text]
    return out
