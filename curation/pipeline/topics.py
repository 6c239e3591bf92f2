"""LDA topic labels (seed 000, Section 4 and supplementary Section 2): each image's topic
distribution, the soft label of the captioner's weakly supervised CNN.

``lda_topics`` is a run-level caption step. It sees the comments that survived the
earlier steps (AVA-Captions, not raw comments: the paper's first "key implementation step"), makes
one document per image from all its comments, and builds the vocabulary from the informative
n-grams of ``informativeness.ngrams`` (noun unigrams and descriptor-object bigrams) that occur in
fewer than ``max_doc_freq`` (10%) of the comments, so "photographic stop words" such as "nice
composition" are left out; ``min_doc_count`` (ours: an n-gram of a single comment cannot group
images) and ``max_features`` (the paper's M = 25,000, most frequent first) bound it. It fits
scikit-learn's LatentDirichletAllocation with K = ``n_topics`` (200 in the paper) and
``random_state`` (same rows and parameters, same topics), and infers each image's distribution.

In bounded memory, whatever the run's size: ``prepare_run`` takes one streamed pass over the run's
comments, ordered by image (topics_corpus.py): the n-gram counts that make the vocabulary cover every
comment, and the model is fitted on at most ``fit_sample`` images (50,000; a sample seeded by
``random_state``, the same images whatever order they come in). ``decide_run`` is then called batch
by batch (``run_shard = "image_id"``: an image's comments in one batch) and infers each batch's
images with the fitted model. A run of no more than ``fit_sample`` images is fitted whole, and its
topics are those of fitting and inferring it in one call. ``decide_run`` without ``prepare_run`` takes
its rows as the whole run (tests, previews).

The paper's bounds assume 1.3M comments. On a first collection of a few dozen, 10% of the comments is
two or three, and with ``min_doc_count`` 2 next to nothing qualifies ("no_vocabulary"). With
``adapt_bounds`` (default) the bounds loosen only as far as the collection needs, in order: the
ceiling becomes at least ``min_doc_count`` + 2 comments (an n-gram shared by two or three comments of
thirty is what groups images there); if that leaves no vocabulary, n-grams of a single comment count
too; if still none, the ceiling goes (a handful of comments has no "photographic stop words" to
tell apart). K is at most the number of documents with vocabulary n-grams (200 topics over 30 images
find nothing more than 30). The bounds and K used are in the model's meta ("vocabulary_bounds").

Decisions: every caption of an image with topic n-grams is kept with score = the image's largest
topic probability and details {"top_topic", "topic_words"}; an image whose comments hold none of
the vocabulary gets "na" with ``no_topic_ngrams`` (a uniform label would teach the CNN nothing), and
every caption gets "na" with ``no_vocabulary`` when the run has no vocabulary at all.

Storage happens outside the filter: the instance keeps the fitted ``model`` (a ``TopicModel``) and
the last ``decide_run``'s ``distributions`` ({image_id: [K floats]}). The executor stores the model
after ``prepare_run`` (``save_run_model``: a FilterArtifact, an .npz file: ``components`` K x V
float32, ``vocabulary``, ``meta`` JSON; written byte-for-byte reproducibly, so finalising twice
reuses the same artifact) and upserts each batch's ImageTopics rows (``store_image_topics``);
``save_run_topics(filter, run)`` does both after a whole run decided in one call.
``load_topic_model(artifact)`` gives the model back to infer the topics of
new images, and ``topic_words(artifact, n)`` lists each topic's top n-grams for display.
"""
from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from .base import Decision, Filter, Item, keep, not_applicable
from .registry import register
from .topics_corpus import MAX_CHARS, RunCorpus, image_batches, ngrams_of_texts

MODEL_FORMAT = "captionlab.lda/1"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
PARSE_BATCH = 2000  # comments parsed at a time in prepare_run's pass


@dataclass
class TopicModel:
    vocabulary: list[str]
    components: "object"  # numpy array, K x V: LDA's topic-word pseudo-counts
    meta: dict = field(default_factory=dict)  # n_topics, priors, params, corpus counts

    @property
    def n_topics(self) -> int:
        return int(self.components.shape[0])

    def top_words(self, n: int = 10) -> list[list[str]]:
        import numpy as np

        order = np.argsort(-self.components, axis=1, kind="stable")[:, :n]
        return [[self.vocabulary[j] for j in row] for row in order]

    def estimator(self):
        """A scikit-learn LDA with this model's fitted topics, ready for ``transform``."""
        import numpy as np
        from sklearn.decomposition import LatentDirichletAllocation
        from sklearn.decomposition._online_lda_fast import _dirichlet_expectation_2d

        k = self.n_topics
        lda = LatentDirichletAllocation(n_components=k, **self.meta.get("estimator", {}))
        lda.components_ = self.components.astype(np.float64)
        lda.exp_dirichlet_component_ = np.exp(_dirichlet_expectation_2d(lda.components_))
        lda.doc_topic_prior_ = self.meta["doc_topic_prior"]
        lda.topic_word_prior_ = self.meta["topic_word_prior"]
        lda.n_features_in_ = len(self.vocabulary)
        lda.n_batch_iter_ = lda.n_iter_ = 1
        return lda

    def infer(self, documents: list[list[str]]):
        """Topic distributions (rows sum to 1) of documents given as lists of n-grams; a document
        without any vocabulary n-gram gets a row of zeros."""
        import numpy as np

        matrix = _count_matrix(documents, {w: j for j, w in enumerate(self.vocabulary)})
        out = np.zeros((len(documents), self.n_topics))
        nonempty = np.flatnonzero(matrix.getnnz(axis=1))
        if len(nonempty):
            out[nonempty] = self.estimator().transform(matrix[nonempty])
        return out


def _count_matrix(documents: list[list[str]], index: dict[str, int]):
    from scipy.sparse import csr_matrix

    rows, cols, vals = [], [], []
    for i, doc in enumerate(documents):
        for j, c in Counter(index[g] for g in doc if g in index).items():
            rows.append(i)
            cols.append(j)
            vals.append(c)
    return csr_matrix((vals, (rows, cols)), shape=(len(documents), len(index)), dtype="float64")


# --- Saving and loading the model -----------------------------------------------------------------

def model_to_bytes(model: TopicModel) -> bytes:
    """An .npz archive (numpy.load reads it) written with fixed timestamps: same model, same bytes."""
    import numpy as np

    arrays = {"components": np.asarray(model.components, dtype=np.float32),
              "vocabulary": np.array(model.vocabulary, dtype=str),
              "meta": np.array(json.dumps({"format": MODEL_FORMAT, **model.meta}, sort_keys=True))}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w") as fh:
                np.lib.format.write_array(fh, array, allow_pickle=False)
    return buffer.getvalue()


def model_from_bytes(data: bytes) -> TopicModel:
    import numpy as np

    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        meta = json.loads(str(archive["meta"]))
        if meta.pop("format", None) != MODEL_FORMAT:
            raise ValueError(f"not an LDA topic model ({MODEL_FORMAT} expected)")
        return TopicModel(vocabulary=[str(w) for w in archive["vocabulary"]],
                          components=archive["components"].astype(np.float64), meta=meta)


def load_topic_model(artifact) -> TopicModel:
    with artifact.data.open("rb") as fh:
        return model_from_bytes(fh.read())


def topic_words(artifact_or_model, n: int = 10) -> list[list[str]]:
    """Each topic's n most weighted n-grams, topic 0 first (for display)."""
    model = artifact_or_model if isinstance(artifact_or_model, TopicModel) else load_topic_model(artifact_or_model)
    return model.top_words(n)


# --- The step ----------------------------------------------------------------------------------------

@register
class LdaTopics(Filter):
    name = "lda_topics"
    # 2: bounds and K adapt to small collections; n-grams stop at punctuation. 3: a run of more than fit_sample
    # images is fitted on a sample of them (streamed; a smaller run's topics are those of version 2).
    version = 3
    label = "LDA topic labels (AVA-Captions)"
    description = ("One document per image from its kept comments; LDA over the informative n-grams that "
                   "occur in fewer than max_doc_freq of the comments; stores each image's topic distribution.")
    run_level = True
    defaults = {
        "n_topics": 200,  # K in the paper
        "max_doc_freq": 0.10,  # n-grams in this share of comments or more are left out
        "min_doc_count": 2,  # n-grams in fewer comments are left out
        "adapt_bounds": True,  # loosen the bounds (and cap K) where a small collection needs it
        "max_features": 25000,  # the paper's M; 0 or None: no cap
        "max_iter": 10,
        "learning_method": "batch",  # or "online" for very large collections
        "random_state": 0,
        "doc_topic_prior": None,  # None: 1/K (scikit-learn's default)
        "topic_word_prior": None,
        "topic_words_in_details": 5,
        # The model is fitted on at most this many images (documents), a sample seeded by random_state; the
        # vocabulary still comes from every comment, and every image is labelled. A run of no more images is
        # fitted whole, as before. 0 or None: every image (memory then grows with the run).
        "fit_sample": 50_000,
    }

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        if int(self.params["n_topics"]) < 1:
            raise ValueError("lda_topics: n_topics must be at least 1")
        if not 0 < float(self.params["max_doc_freq"]) <= 1:
            raise ValueError("lda_topics: max_doc_freq must be in (0, 1]")
        if self.params["learning_method"] not in ("batch", "online"):
            raise ValueError("lda_topics: learning_method must be 'batch' or 'online'")
        sample = self.params["fit_sample"]
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 0):
            raise ValueError(f"lda_topics: fit_sample must be a whole number of images, 0 or null, not {sample!r}")
        self.model: TopicModel | None = None
        self.distributions: dict[int, list[float]] = {}  # the topics of the images of the last decide_run
        self.images_labelled = 0  # images given topics since prepare_run
        self._prepared = False  # prepare_run has fitted the model; decide_run infers batch by batch
        self._fitted = None  # the fitted scikit-learn estimator
        self._parsed: dict[str, list[str]] = {}  # n-grams of the texts parsed last (see ngrams_of_texts)

    def apply(self, items: list[Item]) -> list[Decision]:  # run level only: nothing to decide per chunk
        return [keep() for _ in items]

    # Decided batch by batch, an image's comments together (one document): prepare_run counts the n-grams over
    # the whole run and fits the model on a sample of its images, decide_run infers each batch's topics.
    run_shard = "image_id"

    def prepare_run(self, rows: Iterable[dict]) -> None:
        """One streamed pass over the run's survivors, ordered by image id: the vocabulary from every comment's
        n-grams, the model fitted on at most ``fit_sample`` images (all of a smaller run)."""
        corpus = self._read_run(rows)
        self._prepared, self.images_labelled = True, 0
        self.model, self._fitted, self.distributions = None, None, {}
        vocabulary, bounds = self._adapted_vocabulary(corpus.doc_freq, corpus.freq, corpus.comments)
        if vocabulary:
            self._fit(vocabulary, bounds, corpus)

    def _read_run(self, rows: Iterable[dict]) -> RunCorpus:
        from .informativeness import ngrams

        corpus = RunCorpus(self.params["fit_sample"], self.params["random_state"])
        self._parsed = {}
        for images in image_batches(rows, PARSE_BATCH):
            texts = [row["text"] or "" for image in images for row in image]
            grams = iter(ngrams_of_texts(texts, ngrams, self._parsed))
            for image in images:
                corpus.add_image(image[0]["image_id"], [next(grams) for _ in image])
        return corpus

    def _fit(self, vocabulary: list[str], bounds: dict, corpus: RunCorpus) -> None:
        """The model fitted on the corpus's sample of documents (none: a sample without any of the vocabulary)."""
        import numpy as np

        self._index = {w: j for j, w in enumerate(vocabulary)}
        matrix = _count_matrix(corpus.sample()[1], self._index)
        nonempty = np.flatnonzero(matrix.getnnz(axis=1))  # all of a run fitted whole: the vocabulary is theirs
        if not len(nonempty):
            return
        n_topics = int(self.params["n_topics"])
        if self.params["adapt_bounds"]:
            n_topics = min(n_topics, len(nonempty))
        bounds["n_topics"] = n_topics
        self._fitted = self._estimator(n_topics).fit(matrix[nonempty])
        meta = {**self._meta(self._fitted, len(nonempty)), "comments": corpus.comments, "images": corpus.images,
                "vocabulary_bounds": bounds}
        if corpus.sampled:  # the model saw these images only; the counts above and the vocabulary are the run's
            meta["fit_sample"] = {"images": matrix.shape[0]}
        self.model = TopicModel(vocabulary=vocabulary, components=self._fitted.components_, meta=meta)
        self._top_words = self.model.top_words(int(self.params["topic_words_in_details"]))

    def decide_run(self, rows: list[dict]) -> dict[int, Decision]:
        """The decisions of these rows (a batch of whole images after ``prepare_run``; without it, the whole
        run, fitted first); ``distributions`` holds their images' topics."""
        import numpy as np

        from .informativeness import ngrams

        if not self._prepared:  # the rows are the whole run
            self.prepare_run(sorted(rows, key=lambda row: row["image_id"]))
            self._prepared = False
        self.distributions = {}
        if self.model is None:
            return {row["caption_id"]: not_applicable("no_vocabulary") for row in rows}
        comment_ngrams = ngrams_of_texts([row["text"] or "" for row in rows], ngrams, self._parsed)
        by_image: dict[int, list[int]] = defaultdict(list)
        for position, row in enumerate(rows):
            by_image[row["image_id"]].append(position)
        image_ids = sorted(by_image)
        documents = [[g for p in by_image[i] for g in comment_ngrams[p]] for i in image_ids]
        matrix = _count_matrix(documents, self._index)
        nonempty = np.flatnonzero(matrix.getnnz(axis=1))
        distributions = self._fitted.transform(matrix[nonempty]) if len(nonempty) else []
        self.images_labelled += len(nonempty)

        decisions: dict[int, Decision] = {}
        labelled = {image_ids[i]: distributions[k] for k, i in enumerate(nonempty)}
        for image_id in image_ids:
            dist = labelled.get(image_id)
            if dist is None:
                for p in by_image[image_id]:
                    decisions[rows[p]["caption_id"]] = not_applicable("no_topic_ngrams")
                continue
            self.distributions[image_id] = [round(float(x), 6) for x in dist]
            top = int(np.argmax(dist))
            for p in by_image[image_id]:
                decisions[rows[p]["caption_id"]] = keep("", round(float(dist[top]), 6), top_topic=top,
                                                        topic_words=self._top_words[top])
        return decisions

    def vocabulary(self, comment_ngrams: list[list[str]]) -> list[str]:
        """The n-grams in fewer than max_doc_freq of the comments and in at least min_doc_count,
        the max_features most frequent of them, sorted (the paper's bounds, never adapted)."""
        limit = float(self.params["max_doc_freq"]) * len(comment_ngrams)
        return self._bounded(*_frequencies(comment_ngrams), limit, int(self.params["min_doc_count"] or 1))

    def adapted_vocabulary(self, comment_ngrams: list[list[str]]) -> tuple[list[str], dict]:
        """The vocabulary, and the bounds that gave it: the paper's, loosened step by step (see the module)
        while they leave nothing and ``adapt_bounds`` is on."""
        return self._adapted_vocabulary(*_frequencies(comment_ngrams), len(comment_ngrams))

    def _adapted_vocabulary(self, doc_freq: Counter, freq: Counter, comments: int) -> tuple[list[str], dict]:
        limit = float(self.params["max_doc_freq"]) * comments
        floor = int(self.params["min_doc_count"] or 1)
        tries = [(limit, floor)]
        if self.params["adapt_bounds"]:
            wider = max(limit, floor + 2)
            tries += [(wider, floor), (wider, 1), (float("inf"), 1)]
        vocabulary, used = [], tries[0]
        for used in dict.fromkeys(tries):  # in order, each distinct pair once
            vocabulary = self._bounded(doc_freq, freq, *used)
            if vocabulary:
                break
        bounds = {"max_doc_count": None if used[0] == float("inf") else round(used[0], 4), "min_doc_count": used[1],
                  "adapted": used != tries[0]}
        return vocabulary, bounds

    def _bounded(self, doc_freq: Counter, freq: Counter, limit: float, floor: int) -> list[str]:
        eligible = [g for g, df in doc_freq.items() if df < limit and df >= floor]
        cap = self.params["max_features"]
        if cap:
            eligible = sorted(eligible, key=lambda g: (-freq[g], g))[: int(cap)]
        return sorted(eligible)

    def _estimator(self, n_topics: int):
        from sklearn.decomposition import LatentDirichletAllocation

        return LatentDirichletAllocation(
            n_components=n_topics, max_iter=int(self.params["max_iter"]),
            learning_method=self.params["learning_method"], random_state=self.params["random_state"],
            doc_topic_prior=self.params["doc_topic_prior"], topic_word_prior=self.params["topic_word_prior"],
        )

    def _meta(self, lda, labelled: int) -> dict:
        """The estimator's priors and settings, the parameters, and how many of the images fitted on had
        vocabulary n-grams (``images_labelled``: the run's, unless the model was fitted on a sample)."""
        return {
            "doc_topic_prior": float(getattr(lda, "doc_topic_prior_", 1 / lda.n_components)),
            "topic_word_prior": float(getattr(lda, "topic_word_prior_", 1 / lda.n_components)),
            "estimator": {"max_doc_update_iter": lda.max_doc_update_iter, "mean_change_tol": lda.mean_change_tol},
            "params": dict(self.params), "images_labelled": labelled,
        }


def _frequencies(comment_ngrams: list[list[str]]) -> tuple[Counter, Counter]:
    """(in how many comments each n-gram occurs, how often it occurs)."""
    doc_freq, freq = Counter(), Counter()
    for grams in comment_ngrams:
        doc_freq.update(set(grams))
        freq.update(grams)
    return doc_freq, freq


# --- Storage: what the executor calls after decide_run ----------------------------------------------

def store_image_topics(artifact, distributions: dict[int, list[float]], *, batch_size: int = 2000) -> int:
    """Upsert one ImageTopics row per image for this artifact; returns how many were written."""
    from ..models import ImageTopics

    rows = [ImageTopics(image_id=image_id, artifact=artifact, distribution=list(dist))
            for image_id, dist in sorted(distributions.items())]
    ImageTopics.objects.bulk_create(rows, batch_size=batch_size, update_conflicts=True,
                                    unique_fields=["image", "artifact"], update_fields=["distribution"])
    return len(rows)


def save_run_topics(lda: LdaTopics, run):
    """After ``lda.decide_run(rows)`` over a whole run: store the fitted model as a FilterArtifact of this
    run's collection and each image's distribution as ImageTopics. Returns the artifact, or None when
    nothing was fitted. Safe to call twice: the same model bytes reuse the same artifact."""
    artifact = save_run_model(lda, run)
    if artifact is not None:
        store_image_topics(artifact, lda.distributions)
        save_images_labelled(artifact, len(lda.distributions))
    return artifact


def save_run_model(lda: LdaTopics, run):
    """The fitted model as a FilterArtifact of the run's collection (None when nothing was fitted), before
    the run's batches are decided: each batch's distributions are then stored with ``store_image_topics``."""
    if lda.model is None:
        return None
    data = model_to_bytes(lda.model)
    summary = {"run": run.pk, "n_topics": lda.model.n_topics, "vocabulary": len(lda.model.vocabulary),
               "comments": lda.model.meta.get("comments"), "images": lda.model.meta.get("images"),
               "images_labelled": None}
    return artifact_create(LdaTopics.name, data, extension="npz", collection=run.collection,
                           params=dict(lda.params), summary=summary)


def save_images_labelled(artifact, labelled: int) -> None:
    """The number of images labelled, in the summary of an artifact this run created (a reused one keeps
    the summary of the run that created it)."""
    if artifact.summary.get("images_labelled") is None:
        artifact.summary = {**artifact.summary, "images_labelled": labelled}
        artifact.save(update_fields=["summary"])


def artifact_create(filter_name: str, data: bytes, *, extension: str, collection=None, params=None, summary=None):
    """A new version of ``filter_name``'s artifact holding ``data``; an existing artifact with the same
    bytes is returned instead of a copy."""
    from django.core.files.base import ContentFile
    from django.db import IntegrityError, transaction
    from django.db.models import Max

    from ..models import FilterArtifact

    digest = hashlib.sha256(data).hexdigest()
    for attempt in range(5):
        same = FilterArtifact.objects.filter(filter_name=filter_name, sha256=digest).order_by("-version").first()
        if same is not None:
            return same
        version = (FilterArtifact.objects.filter(filter_name=filter_name).aggregate(v=Max("version"))["v"] or 0) + 1
        artifact = FilterArtifact(filter_name=filter_name, version=version, collection=collection,
                                  params=params or {}, sha256=digest, summary=summary or {})
        try:
            with transaction.atomic():  # the unique (filter_name, version) settles a race: the loser retries
                artifact.data.save(f"{filter_name}-v{version}.{extension}", ContentFile(data), save=False)
                artifact.save()
            return artifact
        except IntegrityError:
            artifact.data.delete(save=False)
            if attempt == 4:
                raise
    raise AssertionError("unreachable")

# --- Display: an image's topics on its page and in the API ------------------------------------------

TOPIC_WORDS_SHOWN = 6


@lru_cache(maxsize=16)
def _artifact_words(artifact_id: int, sha256: str, n: int) -> tuple[tuple[str, ...], ...]:
    """Each topic's top n-grams of a stored model, read once per process per artifact (the sha256 keys a
    model whose file changed). Empty when the file cannot be read: the page still shows probabilities."""
    from ..models import FilterArtifact

    try:
        artifact = FilterArtifact.objects.get(pk=artifact_id)
        return tuple(tuple(words) for words in topic_words(artifact, n))
    except (FilterArtifact.DoesNotExist, OSError, ValueError, KeyError):
        return ()


def image_topics(image, *, top: int = 3, distribution: bool = False) -> list[dict]:
    """The image's stored topic labels, newest model first: for each, the model (artifact id and version,
    the run that fitted it, K) and the ``top`` most probable topics with their probability and words;
    with ``distribution`` the whole distribution too. Reads ``image.topics`` (prefetch it for lists)."""
    out = []
    rows = sorted(image.topics.all(), key=lambda row: -row.artifact_id)
    for row in rows:
        artifact, dist = row.artifact, [float(x) for x in row.distribution or []]
        words = _artifact_words(artifact.pk, artifact.sha256, TOPIC_WORDS_SHOWN)
        order = sorted(range(len(dist)), key=lambda k: (-dist[k], k))[:top]
        entry = {"artifact": artifact.pk, "model_version": artifact.version, "run": (artifact.summary or {}).get("run"),
                 "n_topics": len(dist),
                 "top": [{"topic": k, "probability": round(dist[k], 4),
                          "words": list(words[k]) if k < len(words) else []} for k in order]}
        if distribution:
            entry["distribution"] = dist
        out.append(entry)
    return out


__all__ = ["LdaTopics", "image_topics", "TopicModel", "save_run_topics", "save_run_model", "save_images_labelled",
           "store_image_topics", "load_topic_model", "MAX_CHARS",
           "topic_words", "model_to_bytes", "model_from_bytes", "artifact_create"]
