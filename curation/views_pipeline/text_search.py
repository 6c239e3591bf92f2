"""Caption search for the decisions browser: PostgreSQL full-text search (``SearchVector`` against a
``websearch`` ``SearchQuery``: words, "quoted phrases", -excluded words, or), stemmed with the English
configuration for English collections and the "simple" one otherwise; on SQLite, the embedded default,
every word as a case-insensitive substring. And the filters across steps: "dropped here and kept at step 5".
"""
from __future__ import annotations

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Left

from ..models import Caption, FilterDecision, FilterRun

MAX_QUERY_CHARS = 200
INDEXED_CHARS = 100_000
OUTCOMES = ("keep", "drop", "na")


def config_for(collection) -> str:
    """The text-search configuration of a collection: English stemming for English, "simple" otherwise."""
    language = (collection.language or "").lower()
    return "english" if language == "en" or language.startswith("en-") else "simple"


def search_config(run: FilterRun) -> str:
    return config_for(run.collection)


def words_query(q: str, config: str) -> SearchQuery:
    """The ``websearch`` query of ``q`` (PostgreSQL only)."""
    return SearchQuery(q, search_type="websearch", config=config)


def query_words(q: str) -> list[str]:
    """The words of ``q`` as the SQLite fallback matches them (each a case-insensitive substring)."""
    return [word.strip('"') for word in q.split() if word.strip('"')]


def words_vector(fields: tuple[str, ...], config: str) -> SearchVector:
    """The ``tsvector`` of ``fields``, each cut to its first INDEXED_CHARS characters: a longer caption of many
    distinct words would pass PostgreSQL's 1 MB tsvector limit and fail the whole query."""
    return SearchVector(*(Left(name, INDEXED_CHARS) for name in fields), config=config)


def matching(queryset, q: str, config: str, fields: tuple[str, ...]):
    """The rows of ``queryset`` whose ``fields`` (together) match ``q``: full text on PostgreSQL (the first
    INDEXED_CHARS characters of each), every word a case-insensitive substring of one of the fields elsewhere."""
    if connection.vendor == "postgresql":
        return queryset.annotate(_text=words_vector(fields, config)).filter(_text=words_query(q, config))
    condition = Q()
    for word in query_words(q):
        either = Q()
        for name in fields:
            either |= Q(**{f"{name}__icontains": word})
        condition &= either
    return queryset.filter(condition)


def decisions_matching(decisions, run: FilterRun, q: str):
    """The decisions whose caption (its raw text, or the text a transform made at this step) matches ``q``;
    an image's decision matches when one of the image's captions does."""
    config = search_config(run)
    own = matching(decisions, q, config, ("caption__text", "text_after")).values("pk")
    captions = matching(Caption.objects.filter(image_id=OuterRef("image_id")), q, config, ("text",))
    return decisions.filter(Q(pk__in=own) | Q(caption__isnull=True) & Exists(captions))


def parse_also(text: str, extra: tuple | None = None) -> tuple[list[tuple[int, str]], list[str]]:
    """("5:keep,2:drop", optional (step text, outcome)) -> ([(4, "keep"), (1, "drop")], errors). Steps are
    1-based as the pages number them."""
    parts = [part.strip() for part in (text or "").split(",") if part.strip()]
    if extra and extra[0] not in (None, "") and extra[1] not in (None, ""):
        parts.append(f"{extra[0]}:{extra[1]}")
    found, errors = [], []
    for part in parts[:10]:
        number, _, outcome = part.partition(":")
        if not number.strip().isdigit() or int(number) < 1 or outcome.strip() not in OUTCOMES:
            errors.append(f"{part[:40]!r} is not step:outcome (a step number and keep, drop or na)")
            continue
        found.append((int(number) - 1, outcome.strip()))
    return found, errors


def decisions_also(decisions, run: FilterRun, step: int, also: list[tuple[int, str]]):
    """The decisions (of ``step``) whose item's final outcome at each other step of ``also`` is the one
    given: the caption's own decision there, its image's at an image step, and, on an image step's page,
    any caption of the image at a caption step."""
    snapshot = run.snapshot or []
    on_image = snapshot[step].get("target") == "image"
    for other, outcome in also:
        there = FilterDecision.objects.filter(FilterDecision.final_is(outcome), run=run, step=other)
        if snapshot[other].get("target") == "image":
            decisions = decisions.filter(Exists(there.filter(caption__isnull=True, image_id=OuterRef("image_id"))))
        elif on_image:
            decisions = decisions.filter(Exists(there.filter(caption__image_id=OuterRef("image_id"))))
        else:
            decisions = decisions.filter(Exists(there.filter(caption_id=OuterRef("caption_id"))))
    return decisions
