"""What a filter is, what it sees and what it says.

A filter is a class with a ``name``, an integer ``version`` (bump it when its behaviour changes),
default ``params``, the spaCy components it ``needs`` (empty: it never parses), and ``apply``,
which turns a batch of Items into one Decision per item. A filter that learns corpus statistics
also implements ``fit`` (returns a JSON-able state) and receives that state back in ``__init__``.
A transform returns decisions with ``text`` set: the next steps see that text, and the run saves
it as a new Caption whose parent is the original.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

KEEP, DROP, NA = "keep", "drop", "na"


@dataclass(slots=True)
class Item:
    """One caption with its image, as the filters of one chunk see it.

    ``text`` is the working text (after earlier transforms); ``raw_text`` never changes.
    ``doc`` is the spaCy Doc of ``parse_text`` when the pipeline needs parsing (shared by identical
    texts: do not modify it). Image fields are None where the image has no file yet.
    """

    caption_id: int | None
    image_id: int
    raw_text: str
    text: str
    language: str = ""
    doc: Any = None
    image_format: str | None = None
    width: int | None = None
    height: int | None = None
    sha256: str | None = None
    phash: str | None = None
    image_status: str = "ready"
    file_name: str = ""  # the image file's name in Django's default storage ("" when none)
    labels: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    # Filled by transforms for display: [(start, end)] character spans of raw_text removed.
    removed_spans: list[tuple[int, int]] = field(default_factory=list)
    entity_types: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Decision:
    outcome: str  # KEEP, DROP or NA
    reason: str = ""  # a short code, e.g. "no_determiner", "too_small", "no_labels"
    score: float | None = None
    details: dict = field(default_factory=dict)
    text: str | None = None  # a transform's output text, None when the text is unchanged


class Filter:
    name: ClassVar[str] = ""
    version: ClassVar[int] = 1
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    target: ClassVar[str] = "caption"  # "caption" or "image"
    needs: ClassVar[frozenset[str]] = frozenset()  # spaCy components, e.g. {"tagger", "parser"}
    defaults: ClassVar[dict] = {}
    is_transform: ClassVar[bool] = False
    # Run-level filters decide over the whole run after every chunk (e.g. rare entity types).
    run_level: ClassVar[bool] = False
    # Filters that need corpus statistics fitted before the run.
    fits: ClassVar[bool] = False
    # The decision depends on the text alone (not the image, labels or language field): the
    # executor then applies the filter once per distinct text and shares the decision.
    text_only: ClassVar[bool] = False
    # The decision, and what ``apply`` notes on the item, depend on the item's text alone whenever that
    # text is still its raw text (a transform whose removed spans are relative to the raw text): the
    # executor may then decide such items once per distinct text as well.
    text_determined: ClassVar[bool] = False
    # The decision, and what ``apply`` notes on the item, depend on the item's working text alone, with one
    # exception: ``apply`` sets the item's removed spans to those of the working text placed where that text
    # sits in the raw text (``raw_text.find(text)``; left as they were when it is not found there). The
    # executor then decides each distinct working text once per run and worker and places the spans per
    # item, so a duplicate caption is neither parsed nor transformed again (hypernymization).
    text_keyed: ClassVar[bool] = False
    # The parameters the score is compared with (min_* keeps scores at or above, max_* at or below):
    # the review page draws them on the score's histogram and lets a curator try other values.
    score_thresholds: ClassVar[tuple[str, ...]] = ()
    # Each item's decision depends on that item alone (not on the other items of the batch), and
    # ``apply`` uses no database: the executor may then split a chunk into smaller batches and
    # stream their decisions to the database while it computes the next batch.
    per_item: ClassVar[bool] = False

    def __init__(self, params: dict | None = None, state: Any = None):
        unknown = set(params or {}) - set(self.defaults)
        if unknown:
            raise ValueError(f"{self.name}: unknown parameter(s) {sorted(unknown)}; known: {sorted(self.defaults)}")
        self.params = {**self.defaults, **(params or {})}
        self.state = state

    def wants_doc(self, item: Item) -> bool:
        """Whether ``apply`` reads this item's parse (the executor parses only those). Default: every item
        when the filter ``needs`` spaCy components."""
        return True

    def warm(self) -> None:
        """Load what the filter builds lazily once per process (lexicons, detectors, compiled tables), so
        that a worker pays for it before its first chunk rather than inside it. Optional."""

    def fit(self, items: list[Item]) -> Any:  # pragma: no cover - only for fitting filters
        raise NotImplementedError

    def apply(self, items: list[Item]) -> list[Decision]:
        raise NotImplementedError

    def decide_run(self, rows: list[dict]) -> dict[int, Decision]:  # pragma: no cover - run-level only
        """For run-level filters: ``rows`` describe every item that survived the earlier steps:
        {"caption_id", "image_id", "text", "entity_types", "sha256", "phash", "score"} where
        "score" is this step's own chunk-time score, if any. Return decisions keyed by caption id
        (or by image id for image-target filters); items not in the result are kept."""
        raise NotImplementedError


def keep(reason: str = "", score: float | None = None, **details) -> Decision:
    return Decision(KEEP, reason, score, details)


def drop(reason: str, score: float | None = None, **details) -> Decision:
    return Decision(DROP, reason, score, details)


def not_applicable(reason: str, **details) -> Decision:
    return Decision(NA, reason, None, details)
