"""What the text filters share: the word pattern, per-word memos, the token table of a parse and
``TextFilter`` (a filter that decides once per distinct text)."""
from __future__ import annotations

import re
from functools import lru_cache

from ..base import Decision, Filter, Item, drop

# A word: letters/digits/underscore runs joined by in-word hyphens, apostrophes or dots
# ("ZK-AHS", "Morey's", "06.01.2010", "DSC_2481" are one word each).
WORD_RE = re.compile(r"\w+(?:[-'’.]\w+)*")
LETTER_RE = re.compile(r"[^\W\d_]")
DIGIT_RE = re.compile(r"\d")
# Twitter-style hashtags and handles: the paper names "Twitter hash-tag terms" among what to discard.
HASHTAG_RE = re.compile(r"(?<![\w&])[#@][^\W\d_]\w*")
MAX_LISTED = 20  # offending tokens listed in a decision's details (a 1 MB text stays a small row)


MEMO_SIZE = 200_000  # per-word memos below: emptied when full (words of a run repeat; a few MB each)


def remember(memo: dict, key, value):
    """Store ``value`` under ``key`` in a per-word memo that is emptied when it reaches MEMO_SIZE; returns
    ``value``."""
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value
    return value


def blank(text: str | None) -> bool:
    return not text or text.isspace()


def words(text: str) -> list[str]:
    """The words of ``text`` (do not modify the list: several filters read the same one). Remembered for
    the texts of the current batch, which every word-counting filter reads again (not the long ones)."""
    return _text_words(text) if len(text) <= 2000 else WORD_RE.findall(text)


@lru_cache(maxsize=4096)
def _text_words(text: str) -> list[str]:
    return WORD_RE.findall(text)


def token_table(doc) -> tuple[list[str], list[str], list[bool]]:
    """(texts, coarse part-of-speech tags, punctuation-or-space flags) of the doc's tokens, read once per
    doc and shared by the part-of-speech filters of a batch (each reading the tokens again costs more)."""
    key = id(doc)
    found = _TABLES.get(key)
    if found is not None and found[0] is doc:
        return found[1]
    global _ORTH_POS
    if _ORTH_POS is None:
        from spacy.attrs import ORTH, POS

        _ORTH_POS = [ORTH, POS]
    # One array of (orth, pos) ids per doc and memos from ids to strings: a Token object per token, and a
    # string-store lookup per attribute, cost a third more. The lists are built by comprehensions over the
    # memos (a loop with three appends per token costs twice as much); an id not in them yet (KeyError)
    # is looked up and remembered first.
    orths, poss = doc.to_array(_ORTH_POS).T.tolist() if len(doc) else ([], [])
    lexemes, names = _LEXEMES, _POS_NAMES
    try:
        entries = [lexemes[orth] for orth in orths]
    except KeyError:
        entries = [lexemes.get(orth) or _lexeme(doc.vocab, orth) for orth in orths]
    try:
        tags = [names[pos] for pos in poss]
    except KeyError:
        for pos in set(poss).difference(names):
            names[pos] = doc.vocab.strings[pos] if pos else ""
        tags = [names[pos] for pos in poss]
    texts = [entry[0] for entry in entries]
    skip = [entry[1] for entry in entries]
    table = (texts, tags, skip)
    if len(_TABLES) >= 1024:
        _TABLES.clear()
    _TABLES[key] = (doc, table)  # the doc is held: its id cannot be reused while it is here
    return table


def _lexeme(vocab, orth: int) -> tuple[str, bool]:
    lex = vocab[orth]
    return remember(_LEXEMES, orth, (lex.orth_, lex.is_punct or lex.is_space))


_TABLES: dict[int, tuple] = {}
_ORTH_POS = None  # spaCy's attribute ids, imported on first use (web processes never load spaCy)
_LEXEMES: dict[int, tuple[str, bool]] = {}  # orth id -> (text, punctuation or space)
_POS_NAMES: dict[int, str] = {}  # part-of-speech id -> its name


class TextFilter(Filter):
    """A filter whose decision depends on the item's text (and its parse) only: ``decide`` runs once per
    distinct text of the batch and duplicates get a copy of that decision (the executor, told so by
    ``text_only``, already hands it distinct texts; tests and previews may not)."""

    text_only = True
    per_item = True

    def prepare(self) -> None:
        """Fetch the per-process resources before a batch."""

    def warm(self) -> None:
        self.prepare()

    def decide(self, item: Item) -> Decision:
        raise NotImplementedError

    def apply_distinct(self, items: list[Item]) -> list[Decision]:
        """``apply`` for items whose texts are (mostly) distinct, as the executor hands them over: no
        bookkeeping of repeats (a repeated text is decided again, identically)."""
        self.prepare()
        decide = self.decide
        return [decide(item) if item.text and not item.text.isspace() else drop("empty") for item in items]

    def apply(self, items: list[Item]) -> list[Decision]:
        self.prepare()
        seen: dict[str, Decision] = {}
        out = []
        for item in items:
            text = item.text or ""
            decision = seen.get(text)
            if decision is None:
                decision = seen[text] = drop("empty") if blank(text) else self.decide(item)
                out.append(decision)
            else:
                out.append(Decision(decision.outcome, decision.reason, decision.score, dict(decision.details),
                                    decision.text))
        return out


def no_parse(item: Item) -> Decision | None:
    """For filters that need a parse and got none (spaCy refuses texts over its max_length, 1M characters)."""
    return drop("unparsed", chars=len(item.text)) if item.doc is None else None


UNSEEN = object()  # a memo miss (None is a remembered value)


@lru_cache(maxsize=200_000)
def word_shape(word: str) -> tuple[bool, str, bool]:
    """(has a letter, lower-cased, has a digit)."""
    return bool(LETTER_RE.search(word)), word.lower(), bool(DIGIT_RE.search(word))
