"""Searches by meaning over a collection: captions by text (PostgreSQL full-text and embedding similarity,
merged), captions like a caption, images like an image, images for a text (CLIP's text tower against the
image vectors).

Each function returns ``Hit`` rows, best first, that the search page, the API and the CLI show as they are.
Nothing here computes a collection's embeddings (that is the Embed job): a query on a collection that has no
vectors by the model raises ``PackError(code="no_embeddings")``, and no registered model
``PackError(code="no_model")``, each with a message that says what to do. The one exception is
``search_captions``: its full-text half needs no model, so without a model or vectors it still answers, with
the reason the meaning half is missing in ``notes``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import PackError, get_model, load
from .index import index_search, stored_count
from .store import caption_vectors, image_vectors

RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al. 2009): dampens the weight of the very top ranks
MAX_K = 200
MAX_QUERY_CHARS = 500
SEARCH_CONFIGS = {"en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian",
                  "nl": "dutch", "pt": "portuguese", "ru": "russian", "sv": "swedish"}


@dataclass
class Hit:
    """One result. ``score`` orders the rows (a cosine, or the fused rank score of a caption search);
    ``meaning`` is the cosine similarity and ``text_rank`` the full-text rank, where each applies."""

    kind: str  # "caption" or "image"
    id: int
    image_id: int
    score: float
    text: str = ""  # the caption, or an image's first caption
    meaning: float | None = None
    text_rank: float | None = None
    why: list[str] = field(default_factory=list)
    image_status: str = ""
    has_thumbnail: bool = False
    has_file: bool = False

    def as_dict(self) -> dict:
        return {"kind": self.kind, "id": self.id, "image": self.image_id, "score": round(self.score, 6),
                "text": self.text, "meaning": None if self.meaning is None else round(self.meaning, 6),
                "text_rank": None if self.text_rank is None else round(self.text_rank, 6), "why": self.why}


@dataclass
class Results:
    """Rows with what the page needs to say about them: the model used, and notes such as why the
    meaning half of a caption search is missing."""

    rows: list[Hit]
    query: str = ""
    model: str = ""  # the model's key, "" when none was used
    notes: list[str] = field(default_factory=list)

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)


def _k(k) -> int:
    try:
        return min(max(int(k), 1), MAX_K)
    except (TypeError, ValueError):
        raise PackError("k is the number of results: a whole number from 1 to 200.", code="invalid",
                        field="k") from None


def _query(query) -> str:
    text = (query or "").strip()
    if not text:
        raise PackError("Type something to search for.", code="invalid", field="q")
    if len(text) > MAX_QUERY_CHARS:
        raise PackError(f"A search is at most {MAX_QUERY_CHARS} characters.", code="invalid", field="q")
    return text


def resolve_model(model=None, *, kind: str = "clip"):
    """A PretrainedModel from a row, a name, or None (the default model of ``kind``); PackError(no_model)."""
    from ..models import PretrainedModel

    if isinstance(model, PretrainedModel):
        return model
    if model:
        found = PretrainedModel.objects.filter(name=str(model).strip().lower()).first()
        if found is None:
            return get_model(str(model), kind=kind)  # raises with the registration how-to
        return found
    return get_model(kind=kind)


def require_vectors(collection, model, target: str) -> None:
    """PackError(no_embeddings) before a model is loaded for nothing, when the collection has no stored
    vectors of ``target`` ("image" or "caption") by ``model``."""
    if stored_count(collection, model, target) == 0:
        what = "images" if target == "image" else "captions"
        raise PackError(f"No embeddings yet: the {what} of collection {collection.name!r} have no vectors by "
                        f"{model.name!r}. Run Embed on the collection page (or `manage.py embed {collection.pk} "
                        f"--model {model.name}`) first.", code="no_embeddings")


def _clip(model):
    model = resolve_model(model, kind="clip")
    if model.kind != "clip":
        raise PackError(f"{model.name!r} is a text encoder: searching images needs an image-text (CLIP-family) "
                        f"model.", code="wrong_kind")
    return model


# --- Rows ----------------------------------------------------------------------------------------


def _caption_hits(scored: list[tuple[int, float]], why: str) -> list[Hit]:
    from curation.models import Caption

    found = Caption.objects.select_related("image").only(
        "pk", "text", "image__id", "image__status", "image__thumbnail", "image__file").in_bulk([i for i, _ in scored])
    rows = []
    for caption_id, score in scored:
        caption = found.get(caption_id)
        if caption is not None:
            rows.append(_caption_hit(caption, score, meaning=score, why=[why]))
    return rows


def _caption_hit(caption, score: float, **extra) -> Hit:
    image = caption.image
    return Hit(kind="caption", id=caption.pk, image_id=image.pk, score=float(score), text=caption.text,
               image_status=image.status, has_thumbnail=bool(image.thumbnail), has_file=bool(image.file), **extra)


def _image_hits(scored: list[tuple[int, float]], why: str) -> list[Hit]:
    from curation.models import Caption, Image

    ids = [i for i, _ in scored]
    images = Image.objects.only("pk", "status", "thumbnail", "file").in_bulk(ids)
    first_caption: dict[int, str] = {}
    for image_id, text in Caption.objects.filter(image_id__in=ids).order_by("pk").values_list("image_id", "text"):
        first_caption.setdefault(image_id, text)
    return [Hit(kind="image", id=image_id, image_id=image_id, score=float(score), meaning=float(score), why=[why],
                text=first_caption.get(image_id, ""), image_status=images[image_id].status,
                has_thumbnail=bool(images[image_id].thumbnail), has_file=bool(images[image_id].file))
            for image_id, score in scored if image_id in images]


# --- Captions by text ----------------------------------------------------------------------------


def _full_text(collection, query: str, k: int) -> list[tuple[int, float]]:
    """[(caption_id, rank)] of the captions that match the words, best first: PostgreSQL full-text search
    (stemmed in the collection's language, web-search syntax: "quoted phrases", -not, or), else every word as
    a case-insensitive substring."""
    from django.db import connection
    from django.db.models import Q

    from curation.models import Caption

    captions = Caption.objects.filter(image__collection=collection)
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

        config = SEARCH_CONFIGS.get((collection.language or "").split("-")[0].lower(), "simple")
        vector = SearchVector("text", config=config)
        search = SearchQuery(query, search_type="websearch", config=config)
        rows = (captions.annotate(document=vector).filter(document=search)
                .annotate(rank=SearchRank(vector, search)).order_by("-rank", "pk").values_list("pk", "rank")[:k])
        return [(pk, float(rank)) for pk, rank in rows]
    condition = Q()
    for word in query.split():
        condition &= Q(text__icontains=word)
    return [(pk, 1.0) for pk in captions.filter(condition).order_by("pk").values_list("pk", flat=True)[:k]]


def _fuse(text_hits: list[tuple[int, float]], meaning_hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: ranks, not raw scores, are added, since a ts_rank and a cosine are on scales
    that cannot be compared; a caption found both ways rises above one found either way alone."""
    fused: dict[int, float] = {}
    for hits in (text_hits, meaning_hits):
        for rank, (caption_id, _) in enumerate(hits):
            fused[caption_id] = fused.get(caption_id, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def search_captions(collection, query: str, k: int = 50, model=None) -> Results:
    """Captions of the collection matching ``query`` by its words and by its meaning, merged.

    The meaning half embeds the query with ``model`` (default: the sentence encoder; a CLIP model's text tower
    works too) and searches the collection's stored caption vectors by that model. Without a model or vectors
    the word half still answers, and ``notes`` says why meaning was left out; a model named but not
    registered is an error."""
    query, k = _query(query), _k(k)
    notes: list[str] = []
    text_hits = _full_text(collection, query, k)
    meaning_hits: list[tuple[int, float]] = []
    used = None
    try:
        used = resolve_model(model, kind="text")
        require_vectors(collection, used, "caption")
        vector = load(used).encode_texts([query])
        meaning_hits = index_search(collection=collection, model=used, target="caption", queries=vector, k=k)[0]
    except PackError as exc:
        if model or exc.code not in ("no_model", "no_embeddings"):
            raise
        notes.append(f"Searched by words only: {exc.message}")
    text_rank, meaning = dict(text_hits), dict(meaning_hits)
    fused = _fuse(text_hits, meaning_hits)[:k]
    rows = _caption_hits(fused, "")
    for row in rows:
        row.text_rank, row.meaning = text_rank.get(row.id), meaning.get(row.id)
        row.why = [why for why, found in (("text match", row.text_rank is not None),
                                          ("meaning", row.meaning is not None)) if found]
    return Results(rows, query=query, model=used.key if used and meaning_hits else "", notes=notes)


# --- Like this, and text to images -----------------------------------------------------------------


def captions_like(caption, k: int = 20, model=None) -> Results:
    """Captions of the same collection nearest in meaning to ``caption`` (itself left out)."""
    k = _k(k)
    model = resolve_model(model, kind="text")
    collection = caption.image.collection
    require_vectors(collection, model, "caption")
    vector = caption_vectors(model, [caption.pk], compute=True).get(caption.pk)
    if vector is None:  # a caption deleted meanwhile: nothing to compare with
        raise PackError(f"Caption {caption.pk} has no text to compare.", code="invalid")
    hits = index_search(collection=collection, model=model, target="caption", queries=vector[None, :], k=k,
                        exclude_ids=[caption.pk])[0]
    return Results(_caption_hits(hits, "meaning"), query=caption.text, model=model.key)


def images_like(image, k: int = 20, model=None) -> Results:
    """Images of the same collection nearest to ``image`` by the CLIP model's image vectors (itself left out).
    The image's own vector must be stored (the Embed job computes it with the rest of its collection)."""
    k = _k(k)
    model = _clip(model)
    vectors, errors = image_vectors(model, [image.pk], compute=False)
    if image.pk in errors:
        raise PackError(f"Image {image.pk} could not be embedded: {errors[image.pk]}", code="image_error")
    if image.pk not in vectors:
        raise PackError(f"Image {image.pk} has no embedding by {model.name!r} yet: run Embed on the collection "
                        f"page (or `manage.py embed {image.collection_id} --model {model.name}`) first.",
                        code="no_embeddings")
    hits = index_search(collection=image.collection, model=model, target="image", queries=vectors[image.pk][None, :],
                        k=k, exclude_ids=[image.pk])[0]
    return Results(_image_hits(hits, "looks alike"), query=f"image {image.pk}", model=model.key)


def text_to_images(collection, query: str, k: int = 50, model=None) -> Results:
    """Images of the collection that match ``query`` by the CLIP model's text tower against its image vectors."""
    query, k = _query(query), _k(k)
    model = _clip(model)
    require_vectors(collection, model, "image")
    vector = load(model).encode_texts([query])
    hits = index_search(collection=collection, model=model, target="image", queries=np.asarray(vector), k=k)[0]
    return Results(_image_hits(hits, "meaning"), query=query, model=model.key)


MODES = ("captions", "images")


def collection_search(collection, query: str, *, mode: str = "captions", k: int = 50, model=None) -> Results:
    """The search box of a collection: captions by words and meaning, or images for a text."""
    if mode not in MODES:
        raise PackError("mode is captions, images (by meaning) or words.", code="invalid", field="mode")
    if mode == "images":
        return text_to_images(collection, query, k, model=model)
    return search_captions(collection, query, k, model=model)
