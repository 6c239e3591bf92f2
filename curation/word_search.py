"""Caption search by words across a whole collection (issue 24 item 6): the collection search page's "Words"
mode, ``GET /api/collections/{id}/search/?mode=words`` and ``manage.py search --words``.

The query is the decisions browser's (``views_pipeline.text_search``): PostgreSQL full text against a
``websearch`` query ("quoted phrases", -excluded words, or), stemmed in English for English collections; on
SQLite every word is a case-insensitive substring. Results are ranked (``ts_rank``, then caption id), paginated,
and each carries its text cut into plain and matched pieces, so that a page can mark the match without trusting
any HTML and the API can return the same pieces. Needs no model.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.core.paginator import Paginator
from django.db import connection
from django.db.models.functions import Left

from .models import Caption
from .views_pipeline.text_search import (
    INDEXED_CHARS,
    MAX_QUERY_CHARS,
    config_for,
    matching,
    query_words,
    words_query,
    words_vector,
)

PER_PAGE = 25
MAX_PER_PAGE = 100
START, STOP = "\x02", "\x03"  # PostgreSQL's headline markers: control characters no caption shows
SHOWN_CHARS = 600  # a longer caption is shown as this much around its first match


class WordSearchError(ValueError):
    def __init__(self, message: str, field: str = "q"):
        super().__init__(message)
        self.message, self.field, self.code = message, field, "invalid"


@dataclass
class WordHit:
    id: int
    image_id: int
    text: str
    origin: str
    origin_label: str
    language: str
    pieces: list[tuple[str, bool]]  # (text, is_match), in order: the caption or the part around its match
    rank: float | None
    image_status: str = ""
    has_thumbnail: bool = False
    has_file: bool = False

    def as_dict(self) -> dict:
        return {"id": self.id, "image": self.image_id, "text": self.text, "origin": self.origin,
                "language": self.language, "rank": None if self.rank is None else round(self.rank, 6),
                "highlight": [{"text": text, "match": match} for text, match in self.pieces]}


@dataclass
class WordResults:
    query: str
    page: object  # a django Page of WordHit
    config: str
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> list[WordHit]:
        return list(self.page.object_list)

    @property
    def total(self) -> int:
        return self.page.paginator.count

    def as_dict(self) -> dict:
        return {"mode": "words", "query": self.query, "config": self.config, "count": self.total,
                "page": self.page.number, "pages": self.page.paginator.num_pages,
                "per_page": self.page.paginator.per_page, "notes": self.notes,
                "results": [hit.as_dict() for hit in self.rows]}


def _positive(value, name: str, default: int, most: int | None = None) -> int:
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or (most is not None and number > most):
        bound = f"from 1 to {most}" if most else "from 1 up"
        raise WordSearchError(f"{name} is a whole number {bound}.", name)
    return number


def _marked_words(headline: str) -> list[str]:
    """The words PostgreSQL's headline marked (stems matched: "paddling" for "paddle"). Only these are taken
    from it: ts_headline drops what its parser reads as markup, so the text itself comes from the caption."""
    return sorted({word.strip() for word in re.findall(f"{START}([^{STOP}]*){STOP}", headline or "") if word.strip()})


def _pieces(text: str, words: list[str], whole_words: bool) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, is_match): every occurrence of every word (case-insensitive); a long caption
    is cut to a window around its first match."""
    spans = []
    if words:
        alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
        pattern = re.compile(rf"\b(?:{alternatives})\b" if whole_words else alternatives, re.IGNORECASE)
        spans = [found.span() for found in pattern.finditer(text)]
    low, high = 0, len(text)
    if len(text) > SHOWN_CHARS:
        low = max(0, (spans[0][0] if spans else 0) - SHOWN_CHARS // 3)
        high = min(len(text), low + SHOWN_CHARS)
    pieces, at = [("…", False)] if low else [], low
    for begin, finish in spans:
        if begin < at or finish > high:
            continue
        if begin > at:
            pieces.append((text[at:begin], False))
        pieces.append((text[begin:finish], True))
        at = finish
    if at < high:
        pieces.append((text[at:high], False))
    if high < len(text):
        pieces.append(("…", False))
    return pieces


def search_words(collection, q, *, page=1, per_page=PER_PAGE) -> WordResults:
    """The captions of ``collection`` whose text matches ``q``, best first, one page of them."""
    query = (q or "").strip()
    if not query:
        raise WordSearchError("Type some words to search for.")
    if len(query) > MAX_QUERY_CHARS:
        raise WordSearchError(f"A word search is at most {MAX_QUERY_CHARS} characters.")
    per_page = _positive(per_page, "per_page", PER_PAGE, MAX_PER_PAGE)
    number = _positive(page, "page", 1)
    config = config_for(collection)
    captions = matching(Caption.objects.filter(image__collection=collection), query, config, ("text",))
    postgres = connection.vendor == "postgresql"
    if postgres:
        from django.contrib.postgres.search import SearchHeadline, SearchRank

        search = words_query(query, config)
        captions = captions.annotate(
            rank=SearchRank(words_vector(("text",), config), search),
            headline=SearchHeadline(Left("text", INDEXED_CHARS), search, config=config, start_sel=START,
                                    stop_sel=STOP, highlight_all=True)).order_by("-rank", "pk")
    else:
        captions = captions.order_by("pk")
    captions = captions.select_related("image").only(
        "pk", "text", "origin", "language", "image__id", "image__status", "image__thumbnail", "image__file")
    paginator = Paginator(captions, per_page)
    found = paginator.get_page(number)  # past the last page: the last page
    words = query_words(query)
    found.object_list = [
        WordHit(id=c.pk, image_id=c.image_id, text=c.text, origin=c.origin, origin_label=c.get_origin_display(),
                language=c.language, rank=float(c.rank) if postgres else None,
                pieces=_pieces(c.text, _marked_words(c.headline) if postgres else words, whole_words=postgres),
                image_status=c.image.status, has_thumbnail=bool(c.image.thumbnail), has_file=bool(c.image.file))
        for c in found.object_list]
    notes = []
    if not paginator.count and postgres:
        notes.append("Full-text search ignores very common words (the, a, of…) and matches whole words "
                     f"({'English stems' if config == 'english' else 'no stemming'}): try other words.")
    return WordResults(query=query, page=found, config=config, notes=notes)
