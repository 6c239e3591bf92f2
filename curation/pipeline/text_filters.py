"""Conceptual Captions text filters (seed 002, Section 3, "Text-based Filtering").

The paper annotates alt-text with the Google Cloud Natural Language APIs (part of speech, polarity,
profanity) and applies heuristics on top; here the same heuristics run on spaCy part-of-speech tags
(parsed once per distinct text by the executor), wordfreq (the vocabulary of known words),
vaderSentiment (polarity), better_profanity's word list (profanity) and lingua (language).

Every filter gives every string a decision with a reason: empty text, emoji-only text, markup (plain
text here: "<script>" is just characters that fail the filters), other languages and a 1 MB caption.
Each decides once per distinct text of a batch (web alt-text repeats itself). Heavy resources (the
language detector, the VADER lexicon, the profanity index, the stop words) are imported lazily and
built once per process: web processes that only list filters never load them.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from .base import KEEP, Decision, Filter, Item, drop, keep
from .registry import register

# A word: letters/digits/underscore runs joined by in-word hyphens, apostrophes or dots
# ("ZK-AHS", "Morey's", "06.01.2010", "DSC_2481" are one word each).
WORD_RE = re.compile(r"\w+(?:[-'’.]\w+)*")
LETTER_RE = re.compile(r"[^\W\d_]")
DIGIT_RE = re.compile(r"\d")
# Twitter-style hashtags and handles: the paper names "Twitter hash-tag terms" among what to discard.
HASHTAG_RE = re.compile(r"(?<![\w&])[#@][^\W\d_]\w*")
MAX_LISTED = 20  # offending tokens listed in a decision's details (a 1 MB text stays a small row)


MEMO_SIZE = 200_000  # per-word memos below: emptied when full (words of a run repeat; a few MB each)


def _remember(memo: dict, key, value):
    """Store ``value`` under ``key`` in a per-word memo that is emptied when it reaches MEMO_SIZE; returns
    ``value``."""
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value
    return value


def _blank(text: str | None) -> bool:
    return not text or text.isspace()


_WORDS_MEMO: dict[str, list[str]] = {}


def _words(text: str) -> list[str]:
    """The words of ``text`` (do not modify the list: several filters read the same one). Remembered for
    the texts of the current batch, which every word-counting filter reads again."""
    found = _WORDS_MEMO.get(text)
    if found is None:
        found = WORD_RE.findall(text)
        if len(text) <= 2000:
            if len(_WORDS_MEMO) >= 4096:
                _WORDS_MEMO.clear()
            _WORDS_MEMO[text] = found
    return found


def _token_table(doc) -> tuple[list[str], list[str], list[bool]]:
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
    texts, tags, skip = [], [], []
    lexemes, names = _LEXEMES, _POS_NAMES
    # One array of (orth, pos) ids per doc and memos from ids to strings: a Token object per token, and a
    # string-store lookup per attribute, cost a third more.
    for orth, pos in doc.to_array(_ORTH_POS).tolist():
        lexeme = lexemes.get(orth)
        if lexeme is None:
            lex = doc.vocab[orth]
            lexeme = _remember(lexemes, orth, (lex.orth_, lex.is_punct or lex.is_space))
        texts.append(lexeme[0])
        skip.append(lexeme[1])
        name = names.get(pos)
        if name is None:
            name = names[pos] = doc.vocab.strings[pos] if pos else ""
        tags.append(name)
    table = (texts, tags, skip)
    if len(_TABLES) >= 1024:
        _TABLES.clear()
    _TABLES[key] = (doc, table)  # the doc is held: its id cannot be reused while it is here
    return table


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
                decision = seen[text] = drop("empty") if _blank(text) else self.decide(item)
                out.append(decision)
            else:
                out.append(Decision(decision.outcome, decision.reason, decision.score, dict(decision.details),
                                    decision.text))
        return out


def _no_parse(item: Item) -> Decision | None:
    """For filters that need a parse and got none (spaCy refuses texts over its max_length, 1M characters)."""
    return drop("unparsed", chars=len(item.text)) if item.doc is None else None


# --- Boilerplate ----------------------------------------------------------------------------------

# Separators that surround boilerplate: "... gear down - Stock Image", "Stock Photo | ...", "(photo by X)".
SEP = r"\s\-–—|:•·,;.!?/\\~*()\[\]{}"
HARD_SEP = r"\-–—|:•·,;.!?/\\~()\[\]{}"
WINDOW = 400  # patterns are searched in the first/last characters only (1 MB texts stay fast)
WILDCARD_CHARS = 120  # "photo by ..." crops at most this many characters after the phrase


def _phrase_regex(phrase: str) -> str:
    words = [re.escape(w) for w in re.split(r"[\s\-_]+", phrase) if w]
    left = r"(?<!\w)" if re.match(r"\w", phrase) else ""
    right = r"(?!\w)" if re.search(r"\w$", phrase) else ""
    return left + r"[\s\-_]+".join(words) + right


def _patterns(phrases) -> tuple[list[str], list[str], tuple[str, ...]]:
    """Plain and wildcard ("photo by ..." matches the phrase and what follows it) phrase regexes, and the
    keywords (the longest word of each phrase) whose absence from a text rules every phrase out cheaply."""
    plain, wild, keys = [], [], set()
    for phrase in sorted({str(p).strip().lower() for p in phrases if str(p).strip()}, key=len, reverse=True):
        body = phrase[:-3].strip() if phrase.endswith("...") else phrase
        if not body:
            continue
        (wild if body != phrase else plain).append(_phrase_regex(body))
        longest = max(re.findall(r"\w+", body) or [""], key=len)
        keys.add(longest if len(longest) >= 3 else body)  # "(c) ..." is keyed "(c)", not "c"
    return plain, wild, tuple(sorted(keys))


def _keys_regex(keys: tuple[str, ...]):
    """One regex that finds any of the keywords in lower-cased text (one scan instead of one per keyword),
    grouped by first character (the regex engine then tries one branch per position, not every keyword)."""
    if not keys:
        return None
    by_first: dict[str, list[str]] = {}
    for key in sorted(set(keys), key=len, reverse=True):
        by_first.setdefault(key[0], []).append(re.escape(key[1:]))
    return re.compile("|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in by_first.items()))


@lru_cache(maxsize=32)
def _crop_patterns(prefixes: tuple, suffixes: tuple):
    flags = re.IGNORECASE
    pre_plain, pre_wild, pre_keys = _patterns(prefixes)
    suf_plain, suf_wild, suf_keys = _patterns(suffixes)
    alts = ["(?:" + "|".join(pre_plain) + ")"] if pre_plain else []
    if pre_wild:  # a wildcard prefix runs to the next hard separator, which must be there
        alts.append("(?:" + "|".join(pre_wild) + f")[^{HARD_SEP}\\n]{{0,{WILDCARD_CHARS}}}(?=[{HARD_SEP}])")
    prefix = re.compile(f"[{SEP}]*(?:{'|'.join(alts)})[{SEP}]*", flags) if alts else None
    suffix = re.compile(f"[{SEP}]*(?:{'|'.join(suf_plain)})[{SEP}]*$", flags) if suf_plain else None
    # A wildcard suffix must follow a hard separator (or start the text): "A dog. Photo by Ann Lee"
    # crops, "Children pose for a photo by the lake" does not.
    wild = (re.compile(f"(?P<lead>[{SEP}]*)(?:{'|'.join(suf_wild)})[^\\n]{{0,{WILDCARD_CHARS}}}$", flags)
            if suf_wild else None)
    return prefix, suffix, wild, _keys_regex(pre_keys), _keys_regex(suf_keys), _keys_regex(pre_keys + suf_keys)


def _crop_bounds(text: str, patterns) -> tuple[int, int]:
    """(a, b): text[a:b] is what remains after repeatedly cropping boilerplate at both ends."""
    prefix, suffix, wild, pre_keys, suf_keys, any_keys = patterns
    a, b = 0, len(text)
    if b <= WINDOW and (any_keys is None or not any_keys.search(text.lower())):
        return a, b  # a short text (head and tail are the whole text) without any keyword: nothing to crop
    for _ in range(10):  # "Stock Photo - Royalty Free: ..." needs two rounds
        start = (a, b)
        if prefix is not None and pre_keys.search(text[a:min(b, a + WINDOW)].lower()):
            m = prefix.match(text, a, min(b, a + WINDOW))
            if m and m.end() > a:
                a = m.end()
        window = max(a, b - WINDOW)
        if suf_keys is None or not suf_keys.search(text[window:b].lower()):
            if (a, b) == start:
                break
            continue
        if suffix is not None and b > a:
            m = suffix.search(text, window, b)
            if m:
                b = m.start()
        pos = window
        while wild is not None and b > a:
            m = wild.search(text, pos, b)
            if not m:
                break
            if m.start() == a or re.search(f"[{HARD_SEP}]", m.group("lead")):
                b = m.start()
                break
            pos = m.start() + 1
        if (a, b) == start:
            break
    return a, b


@register
class BoilerplateCrop(Filter):
    name = "boilerplate_crop"
    label = "Crop boilerplate"
    description = ("Crops predefined boiler-plate prefixes and suffixes (\"stock photo\", \"click to enlarge "
                   "picture\") with the punctuation around them; a phrase ending in \"...\" also crops what "
                   "follows it (\"photo by ...\"). Texts left empty are dropped.")
    is_transform = True
    text_only = False  # the removed spans are per item (relative to each item's raw text)
    text_determined = True  # ... but the same for every item whose text is its raw text
    per_item = True
    defaults = {
        "prefixes": ["stock photo", "stock image", "stock picture", "royalty free stock photo", "royalty free",
                     "click to enlarge picture", "click to enlarge", "image may contain", "free download",
                     "photo:", "image:", "picture:"],
        "suffixes": ["stock photo", "stock photos", "stock image", "stock picture", "stock photography",
                     "royalty free stock photo", "royalty free image", "royalty free", "click to enlarge picture",
                     "click to enlarge", "free download", "photo by ...", "photo credit ...",
                     "photo courtesy of ...", "image courtesy of ...", "image by ...", "© ...", "(c) ..."],
    }

    def apply(self, items: list[Item]) -> list[Decision]:
        patterns = _crop_patterns(tuple(self.params["prefixes"]), tuple(self.params["suffixes"]))
        bounds: dict[str, tuple[int, int]] = {}  # per distinct text; the spans are per item
        out = []
        for item in items:
            text = item.text or ""
            if _blank(text):
                out.append(drop("empty"))
                continue
            if text not in bounds:
                bounds[text] = _crop_bounds(text, patterns)
            out.append(self._crop(item, text, *bounds[text]))
        return out

    @staticmethod
    def _crop(item: Item, text: str, a: int, b: int) -> Decision:
        if (a, b) == (0, len(text)):
            return Decision(KEEP, "unchanged")
        kept = text[a:b]
        a += len(kept) - len(kept.lstrip())
        b -= len(kept) - len(kept.rstrip())
        removed = [s[:200] for s in (text[:a], text[b:]) if s.strip()]
        spans = [(s, e) for s, e in ((0, a), (max(a, b), len(text))) if e > s]
        # Spans are relative to raw_text; after an earlier transform they are shifted when the working
        # text is still a piece of the raw text, and left out otherwise.
        offset = 0 if text == item.raw_text else (item.raw_text or "").find(text)
        if offset >= 0:
            item.removed_spans.extend((s + offset, e + offset) for s, e in spans)
        if a >= b:
            return drop("empty_after_crop", removed=removed)
        return Decision(KEEP, "cropped", details={"removed": removed}, text=text[a:b])


@lru_cache(maxsize=32)
def _drop_patterns(patterns: tuple):
    plain, wild, keys = _patterns(patterns)
    alts = "|".join(plain + wild)
    if not alts:
        return None, None, None
    start = re.compile(f"[{SEP}\"'“”‘’]*(?P<p>{alts})", re.IGNORECASE)
    end = re.compile(f"(?P<p>{alts})[{SEP}\"'“”‘’]*$", re.IGNORECASE)
    return start, end, _keys_regex(keys)


@register
class BoilerplateDrop(TextFilter):
    name = "boilerplate_drop"
    label = "Drop boilerplate"
    description = ("Drops texts that begin or end with boilerplate patterns such as \"embedded image "
                   "permalink\" or \"profile photo\" (case-insensitive, curator-editable).")
    defaults = {
        "patterns": ["embedded image permalink", "profile photo", "profile picture", "see more", "view image",
                     "image result for", "click here", "read more", "no image available", "image not found",
                     "image unavailable", "placeholder image", "default avatar", "user avatar"],
    }

    def prepare(self):
        self.start, self.end, self.keys = _drop_patterns(tuple(self.params["patterns"]))

    def decide(self, item):
        text = item.text
        if self.keys is None:
            return keep()
        head = text[:WINDOW].lower()
        in_head = self.keys.search(head)
        if in_head:
            m = self.start.match(text, 0, WINDOW)
            if m:
                return drop("boilerplate", pattern=m.group("p"), where="start")
        tail = max(0, len(text) - WINDOW)
        if in_head if tail == 0 else self.keys.search(text[tail:].lower()):
            m = self.end.search(text, tail)
            if m:
                return drop("boilerplate", pattern=m.group("p"), where="end")
        return keep()


# --- Language -------------------------------------------------------------------------------------

@lru_cache(maxsize=8)
def _language_detector(codes: tuple):
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = []
    for code in codes:
        iso = getattr(IsoCode639_1, code.upper(), None)
        if iso is None:
            raise ValueError(f"language: unknown ISO 639-1 code {code!r}")
        languages.append(Language.from_iso_code_639_1(iso))
    if len(languages) < 2:
        raise ValueError("language: the detector needs at least two candidate languages")
    return LanguageDetectorBuilder.from_languages(*languages).build()


@register
class LanguageFilter(TextFilter):
    name = "language"
    label = "Language"
    description = ("Keeps texts in the accepted languages (lingua). Short texts spread the detector's confidence "
                   "over related languages (\"A dog on the beach.\" is 0.39 English among twelve candidates), so "
                   "the threshold is relative: the accepted language's confidence over the most likely one's.")
    defaults = {
        "languages": ["en"],  # accepted ISO 639-1 codes
        "candidates": ["en", "fr", "de", "es", "it", "pt", "nl", "tr", "zh", "ja", "ru", "ar"],
        # Keep when (best accepted language's confidence) / (top language's confidence) >= this;
        # 1.0 means an accepted language is the most likely one. Measured on lingua 2.1: short English
        # captions sit at 0.52-1.0, French, German, Spanish, Italian, Dutch, Turkish sentences at 0.0-0.17.
        "min_relative_confidence": 0.5,
        # Names carry their own language's letter n-grams: lingua calls the paper's Harrison Ford alt-text
        # ("... in Deauville, France.") French at 0.999. Detection therefore reads the words that do not
        # start with a capital (after the first word) when there are at least this many; else the whole text
        # (with three, "Café le fil du Rasoir #1" reads as "le fil du", too little to tell French).
        "min_lowercase_words": 4,
        "max_chars": 1000,  # detection reads the first characters only
        # English fast path: when English is accepted and the sample is plain ASCII with at least this
        # share of English stop words AND of the 25,000 most common English words (wordfreq), it is
        # English without asking lingua (~0.5 ms a text). French, Spanish or German sentences fail the
        # stop-word share and still go to lingua. 0 turns the fast path off.
        "fast_english_stopword_share": 0.2,
        "fast_english_common_share": 0.9,
    }
    score_thresholds = ("min_relative_confidence",)

    def __init__(self, params: dict | None = None, state=None):
        super().__init__(params, state)
        from lingua import IsoCode639_1  # a compiled module: cheap enough to check a curator's edit early

        codes = [*self.params["languages"], *self.params["candidates"]]
        unknown = [c for c in codes if not isinstance(c, str) or not hasattr(IsoCode639_1, c.upper())]
        if unknown:
            raise ValueError(f"language: unknown ISO 639-1 code(s) {unknown}")

    def prepare(self):
        self.accepted = {c.lower() for c in self.params["languages"]}
        self.detector = _language_detector(tuple(sorted({c.lower() for c in self.params["candidates"]}
                                                        | self.accepted)))

    def warm(self):
        self.prepare()
        from .informativeness import _common_english_words

        _common_english_words()
        # lingua loads a language's models when a text first needs them: load those of Latin-script text.
        self.detector.compute_language_confidence_values("Une maison près du vieux pont sur la rivière")

    def decide(self, item):
        text = item.text[: self.params["max_chars"]]
        if not LETTER_RE.search(text):
            return drop("no_letters")
        if self._fast_english(text):
            return keep(score=1.0, language="en", method="vocabulary")
        sample = self._sample(text)
        values = self.detector.compute_language_confidence_values(sample)
        if not values or values[0].value <= 0:
            return drop("unknown_language")
        top = values[0]
        best = max((v.value for v in values if v.language.iso_code_639_1.name.lower() in self.accepted), default=0.0)
        relative = round(best / top.value, 4)
        details = {"language": top.language.iso_code_639_1.name.lower(), "confidence": round(top.value, 4)}
        if relative < self.params["min_relative_confidence"]:
            return drop("wrong_language", score=relative, **details)
        return keep(score=relative, **details)

    def _surely_english(self, sample: str) -> bool:
        """Whether a plain-ASCII sample is English by its words alone (see the fast_english_* parameters)."""
        if "en" not in self.accepted or not self.params["fast_english_stopword_share"] or not sample.isascii():
            return False
        # (stop word, common word) for each alphabetic word (lower-cased, punctuation stripped); the
        # shares are those of informativeness.english_stopword_share and common_english_share.
        memo = _ENGLISH_WORDS
        words = stops = commons = 0
        for token in sample.split():
            flags = memo.get(token, _UNSEEN)
            if flags is _UNSEEN:
                flags = _english_word(token)
            if flags is not None:
                words += 1
                stops += flags[0]
                commons += flags[1]
        return self._english_shares(words, stops, commons)

    def _english_shares(self, words: int, stops: int, commons: int) -> bool:
        """Enough alphabetic words, and enough of them stop words and common English words."""
        if not words or words < self.params["min_lowercase_words"]:
            return False
        return (stops / words >= self.params["fast_english_stopword_share"]
                and commons / words >= self.params["fast_english_common_share"])

    def _fast_english(self, text: str) -> bool:
        """``_surely_english`` of the text's sample (``_sample``), in one pass over its words with one
        memo lookup each (most captions pass here, and each of the two in turn costs twice this)."""
        if "en" not in self.accepted or not self.params["fast_english_stopword_share"]:
            return False
        words = _words(text)
        memo = _LANGUAGE_WORDS
        lettered = alphabetic = stops = commons = 0
        plain = True
        for index in range(1, len(words)):
            word = words[index]
            found = memo.get(word)
            if found is None:
                found = _language_word(word)
            lower, has_letter, ascii_word, flags = found
            if lower:
                lettered += has_letter
                plain = plain and ascii_word
                if flags is not None:
                    alphabetic += 1
                    stops += flags[0]
                    commons += flags[1]
        if lettered < self.params["min_lowercase_words"]:  # the sample is the whole text
            return self._surely_english(text)
        return plain and self._english_shares(alphabetic, stops, commons)

    def _sample(self, text: str) -> str:
        """The text detection reads: its words after the first that do not start with a capital, when there
        are enough of them with a letter; else the whole text."""
        lower = [w for w in _words(text)[1:] if not w[0].isupper()]
        if sum(1 for w in lower if _word_shape(w)[0]) >= self.params["min_lowercase_words"]:
            return " ".join(lower)
        return text


_ENGLISH_WORDS: dict[str, tuple[int, int] | None] = {}
_UNSEEN = object()
# A word of ``_words`` -> (not capitalised, has a letter, plain ASCII, ``_english_word`` of it)
_LANGUAGE_WORDS: dict[str, tuple] = {}


def _language_word(word: str) -> tuple:
    flags = _ENGLISH_WORDS.get(word, _UNSEEN)
    if flags is _UNSEEN:
        flags = _english_word(word)
    return _remember(_LANGUAGE_WORDS, word, (not word[0].isupper(), _word_shape(word)[0], word.isascii(), flags))


def _english_word(token: str) -> tuple[int, int] | None:
    """For a whitespace-separated token: None unless it is alphabetic once lower-cased and stripped of
    punctuation, else (1 if an English stop word, 1 if one of the 25,000 most common English words).
    Remembered per token (``_ENGLISH_WORDS``)."""
    from .informativeness import STOP_WORDS, _common_english_words

    word = token.lower().strip(".,;:!?'\"()")
    flags = None
    if word and word.isalpha():
        flags = (int(word in STOP_WORDS), int(word in _common_english_words()))
    return _remember(_ENGLISH_WORDS, token, flags)


# --- Part of speech -------------------------------------------------------------------------------

@register
class PosPresence(TextFilter):
    name = "pos_presence"
    label = "Determiner, noun, preposition"
    description = ("Drops candidates with no determiner, no noun or no preposition. Nouns include proper nouns: "
                   "the paper's annotator (Google Cloud NL) tags both NOUN and marks properness separately.")
    needs = frozenset({"pos"})
    defaults = {"require_determiner": True, "require_noun": True, "require_preposition": True,
                "proper_nouns_are_nouns": True}

    def prepare(self):
        nouns = {"NOUN", "PROPN"} if self.params["proper_nouns_are_nouns"] else {"NOUN"}
        self.checks = [(what, tags) for what, param, tags in (
            ("determiner", "require_determiner", {"DET"}), ("noun", "require_noun", nouns),
            ("preposition", "require_preposition", {"ADP"})) if self.params[param]]

    def decide(self, item):
        unparsed = _no_parse(item)
        if unparsed:
            return unparsed
        found = set(_token_table(item.doc)[1])
        missing = [what for what, tags in self.checks if not found & tags]
        return drop(f"no_{missing[0]}", missing=missing) if missing else keep()


@register
class NounRatio(TextFilter):
    name = "noun_ratio"
    label = "Noun ratio"
    description = "Drops candidates whose share of nouns among the tokens (punctuation excluded) is too high."
    needs = frozenset({"pos"})
    # 0.8: the alt-texts the paper keeps (Table 1, Figure 1) measure 0.42-0.74 with spaCy's tags (proper
    # nouns counted, as its annotator does; en_core_web_sm tags "adorn" and "derelict" in the McKellar
    # example as nouns), while title-like keyword strings ("Boston Red Sox Baseball Cap For Sale",
    # "DH89 Dragon Rapide ZK-AHS, MOTAT, Auckland") measure 0.83-1.0.
    defaults = {"max_ratio": 0.8, "proper_nouns_are_nouns": True}
    score_thresholds = ("max_ratio",)

    def decide(self, item):
        unparsed = _no_parse(item)
        if unparsed:
            return unparsed
        _, all_tags, skip = _token_table(item.doc)
        tags = [tag for tag, skipped in zip(all_tags, skip) if not skipped] if True in skip else all_tags
        if not tags:
            return drop("no_words")
        nouns = tags.count("NOUN") + (tags.count("PROPN") if self.params["proper_nouns_are_nouns"] else 0)
        ratio = round(nouns / len(tags), 4)
        if ratio > self.params["max_ratio"]:
            return drop("high_noun_ratio", score=ratio, nouns=nouns, tokens=len(tags))
        return keep(score=ratio, nouns=nouns, tokens=len(tags))


# --- Word statistics ------------------------------------------------------------------------------

@register
class UniqueWordRatio(TextFilter):
    name = "unique_word_ratio"
    label = "Unique-word ratio"
    description = "Drops candidates whose distinct (lower-cased) words are too small a share of their words."
    # 0.5: ordinary sentences with repeated function words ("A view of the city of London from the top of
    # the tower") stay above 0.65; keyword spam ("sale sale cheap sale") falls below.
    defaults = {"min_ratio": 0.5}
    score_thresholds = ("min_ratio",)

    def decide(self, item):
        words = _words(item.text)
        if not words:
            return drop("no_words")
        unique = len(set(map(str.lower, words)))
        ratio = round(unique / len(words), 4)
        if ratio < self.params["min_ratio"]:
            return drop("low_unique_ratio", score=ratio, unique=unique, words=len(words))
        return keep(score=ratio, unique=unique, words=len(words))


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


_CONTENT_WORDS: dict[str, str | None] = {}  # word -> its lower-cased form when a content word, else None


def _content_word(word: str, stop: frozenset[str]) -> str | None:
    lowered = word.lower()
    content = lowered if lowered not in stop and LETTER_RE.search(lowered) else None
    return _remember(_CONTENT_WORDS, word, content)


@register
class TokenRepetition(TextFilter):
    name = "token_repetition"
    label = "Token repetition"
    description = ("Drops candidates where a content word (not a stop word, not a number) occurs more than "
                   "max_repeats times, or where repeated occurrences are too large a share of the content words.")
    # rate = 1 - distinct/total over content words. "A dog chases another dog" is 0.33 and stays;
    # "Red dress, red shoes: dress shoes" is 0.5 and goes.
    defaults = {"max_repeats": 2, "max_rate": 0.4}
    score_thresholds = ("max_rate",)

    def prepare(self):
        self.stop = _stop_words()

    def decide(self, item):
        words = _words(item.text)
        if not words:
            return drop("no_words")
        contents = []
        get = _CONTENT_WORDS.get
        for word in words:
            content = get(word, _UNSEEN)
            if content is _UNSEEN:
                content = _content_word(word, self.stop)
            if content is not None:
                contents.append(content)
        total = len(contents)
        distinct = len(set(contents))
        rate = round(1 - distinct / total, 4) if total else 0.0
        if distinct == total:  # each once (or none): the first is a most frequent one
            token, most = (contents[0], 1) if total else ("", 0)
        else:  # the first of the most frequent, in order of first occurrence
            token, most = Counter(contents).most_common(1)[0]
        if most > self.params["max_repeats"]:
            return drop("repeated_token", score=rate, token=token[:100], count=most)
        if rate > self.params["max_rate"]:
            return drop("high_repetition", score=rate, token=token[:100], count=most)
        return keep(score=rate)


_NOT_LETTERED, _LOWER, _CAPITALISED = 1, 2, 3
_CASES: dict[str, int] = {}  # word -> whether it starts with a letter, and a capital one


def _case(word: str) -> int:
    case = (_CAPITALISED if word[0].isupper() else _LOWER) if LETTER_RE.match(word) else _NOT_LETTERED
    return _remember(_CASES, word, case)


@register
class Capitalisation(TextFilter):
    name = "capitalisation"
    label = "Capitalisation"
    description = ("Drops candidates whose first word is not capitalised, or with too high a share of capitalised "
                   "words (title-case SEO strings). Words starting with a digit count as neither.")
    # 0.8: the alt-texts the paper keeps are full of names yet measure 0.6-0.73 ("Musician Justin Timberlake
    # performs at the 2017 Pilgrimage Music & Cultural Festival ..." is 0.67; "Actor Tom Hanks arrives at
    # the Academy Awards in Los Angeles" 0.73), while title-case strings measure 0.85-1.0.
    defaults = {"require_first_capitalised": True, "max_capitalised_ratio": 0.8}
    score_thresholds = ("max_capitalised_ratio",)

    def decide(self, item):
        words = _words(item.text)
        if not words:
            return drop("no_words")
        get = _CASES.get
        cases = [get(w) or _case(w) for w in words]
        capitalised = cases.count(_CAPITALISED)
        lettered = capitalised + cases.count(_LOWER)
        ratio = round(capitalised / lettered, 4) if lettered else 0.0
        first = words[0]
        if self.params["require_first_capitalised"] and cases[0] == _LOWER:
            return drop("first_not_capitalised", score=ratio, first_word=first[:100])
        if ratio > self.params["max_capitalised_ratio"]:
            return drop("too_many_capitalised", score=ratio, capitalised=capitalised, words=lettered)
        return keep(score=ratio)


# --- Vocabulary -----------------------------------------------------------------------------------

@lru_cache(maxsize=200_000)
def _zipf(word: str, language: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language)


@lru_cache(maxsize=200_000)
def _word_shape(word: str) -> tuple[bool, str, bool]:
    """(has a letter, lower-cased, has a digit)."""
    return bool(LETTER_RE.search(word)), word.lower(), bool(DIGIT_RE.search(word))


def _name_like(token) -> bool:
    """A proper noun spelled as a name ("Balakot", "McKellar", "O'Neill"), not a code ("DSC_2481", "A319")."""
    return token.pos_ == "PROPN" and _name_text(token.text)


@lru_cache(maxsize=100_000)
def _name_text(text: str) -> bool:
    """Spelled as a name: a capital, then letters and the apostrophes, dots and hyphens of names."""
    return text[:1].isupper() and all(c.isalpha() or c in "'’.-" for c in text)


_KNOWN_WORDS: dict[tuple, dict] = {}  # (language, min_zipf, min_zipf_with_digits) -> {word: _look_up(word)}


@register
class UnknownTokens(TextFilter):
    name = "unknown_tokens"
    label = "Unknown tokens"
    description = ("Every word must be in a vocabulary of known words: wordfreq's Zipf frequency >= min_zipf. "
                   "Hashtags and @handles count as unknown. Score: the Zipf frequency of the rarest word.")
    needs = frozenset({"pos"})
    defaults = {
        "language": "en",
        # wordfreq lists words down to Zipf 1.0. At 1.5, ordinary words ("floret" 1.76, "tessellated" 1.74)
        # pass, while camera file names ("DSC_2481", "IMG_4663" 0.0), rare misspellings ("photgraph",
        # "amazng" 0.0) and hashtag words ("instagood" 1.42) fail. Frequent misspellings ("definately"
        # 2.87) are in any web vocabulary, the paper's included.
        "min_zipf": 1.5,
        # wordfreq estimates words with digits from their shape ("a319" -> "a000"), a step below plain words:
        # "A319" (0.9) and "F16" (1.9) pass, "DH89", "WCIT2010", "IMG_4663" (0.0) do not.
        "min_zipf_with_digits": 0.5,
        # The paper's vocabulary (1B token types seen 5+ times in English Wikipedia) holds nearly every
        # name, and its text filters run before hypernymization, whose input is "a majority of captions
        # containing proper names". wordfreq holds only frequent names (Balakot 1.24, Oluwaseun 0.0), so
        # name-like proper nouns are skipped here and left to hypernymization; codes are still checked.
        "ignore_proper_nouns": True,
    }

    def prepare(self):
        key = (self.params["language"], self.params["min_zipf"], self.params["min_zipf_with_digits"])
        self.known = _KNOWN_WORDS.setdefault(key, {})

    def warm(self):
        self.prepare()
        _zipf("the", self.params["language"])  # loads wordfreq's list

    def _look_up(self, word: str):
        """None for a word without a letter, else (Zipf frequency, below its threshold, lower-cased);
        remembered per word for these parameters."""
        lettered, lowered, digits = _word_shape(word)
        found = None
        if lettered:
            z = _zipf(lowered, self.params["language"])
            found = (z, z < (self.params["min_zipf_with_digits"] if digits else self.params["min_zipf"]), lowered)
        return _remember(self.known, word, found)

    def decide(self, item):
        text = item.text
        if item.doc is not None:
            texts, tags, _ = _token_table(item.doc)
            if self.params["ignore_proper_nouns"]:
                words = [w for w, tag in zip(texts, tags) if not (tag == "PROPN" and _name_text(w))]
            else:
                words = texts
        else:  # unparsed (too long to parse): every word is checked
            words = _words(text)
        if "#" in text or "@" in text:
            unknown = list(dict.fromkeys(m.group() for m in HASHTAG_RE.finditer(text)))[:MAX_LISTED]
        else:
            unknown = []
        tagged = {u[1:].lower() for u in unknown}  # "#instagood" is listed once, not again as "instagood"
        rarest, rarest_word, checked = None, "", 0
        memo = self.known
        for word in words:
            if len(unknown) >= MAX_LISTED:
                break  # enough to decide and to show; a 1 MB text of unknown words stops here
            found = memo.get(word, _UNSEEN)
            if found is _UNSEEN:
                found = self._look_up(word)
            if found is None:  # no letter
                continue
            checked += 1
            z, below, lowered = found
            if below and word not in unknown and lowered not in tagged:
                unknown.append(word)
            if rarest is None or z < rarest:
                rarest, rarest_word = z, word
        if unknown:
            return drop("unknown_tokens", score=rarest, unknown=[u[:100] for u in unknown])
        if not checked:  # names only (skipped) count as known; no letters at all is no text to judge
            return keep(checked=0) if LETTER_RE.search(text) else drop("no_words")
        return keep(score=rarest, rarest=rarest_word[:100], checked=checked)


# --- Polarity and profanity -----------------------------------------------------------------------

@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


_VADER_WORDS: dict[str, bool] = {}  # whitespace-separated token -> in VADER's lexicon once stripped


def _vader_neutral(analyser, text: str) -> bool:
    """True when VADER's compound is surely 0.0: no emoji to translate (plain ASCII) and none of the words
    as VADER splits and strips them is in its lexicon. Every sentiment is then 0 (boosters, negations,
    "but" and idioms only scale a lexicon word's valence), and the sum normalises to 0.0. Most
    descriptive captions have no sentiment word; VADER itself costs several times this check."""
    if not text.isascii():
        return False
    memo = _VADER_WORDS
    for word in text.split():
        hit = memo.get(word)
        if hit is None:
            from vaderSentiment.vaderSentiment import SentiText

            hit = _remember(memo, word, SentiText._strip_punc_if_word(word).lower() in analyser.lexicon)
        if hit:
            return False
    return True


@register
class Polarity(TextFilter):
    name = "polarity"
    label = "Polarity"
    description = "Drops candidates whose VADER compound polarity is extreme (too negative or too positive)."
    # VADER's compound saturates as sentiment words pile up: one strong word ("A beautiful sunset over the
    # lake") gives about 0.6, the paper's news-like alt-texts 0.5-0.65; beyond +/-0.8 takes two or more
    # strong words or intensifiers ("A beautiful smiling happy bride with lovely flowers" 0.94), which is
    # promotion or emotion rather than description.
    defaults = {"min_compound": -0.8, "max_compound": 0.8, "max_chars": 2000}  # VADER is quadratic: read a prefix
    score_thresholds = ("min_compound", "max_compound")

    def prepare(self):
        self.analyser = _vader()

    def decide(self, item):
        sample = item.text[: self.params["max_chars"]]
        compound = 0.0 if _vader_neutral(self.analyser, sample) else round(self.analyser.polarity_scores(sample)["compound"], 4)
        details = {"truncated": True} if len(sample) < len(item.text) else {}
        if compound <= self.params["min_compound"]:
            return drop("too_negative", score=compound, **details)
        if compound >= self.params["max_compound"]:
            return drop("too_positive", score=compound, **details)
        return keep(score=compound, **details)


# better_profanity's own matcher walks the text character by character against every listed word
# (about 50 ms per caption), far too slow for a run; the index below matches its word list and its
# character substitutions ("sh1t", "f*ck") per distinct token instead.
PROFANITY_TOKEN_RE = re.compile(r"(?:[^\W_]|[@$*])+")


class _ProfanityIndex:
    def __init__(self, words: set[str], char_map: dict):
        def token_regex(part: str) -> str:
            return "".join("[" + "".join(re.escape(c) for c in char_map[ch]) + "]" if ch in char_map
                           else re.escape(ch) for ch in part)

        by_length: dict[int, list[str]] = {}
        first_by_length: dict[int, list[str]] = {}  # the first tokens of phrases
        phrases = []
        for word in words:
            parts = PROFANITY_TOKEN_RE.findall(word)
            if len(parts) == 1:
                by_length.setdefault(len(parts[0]), []).append(token_regex(parts[0]))
            elif parts:
                phrases.append(" ".join(token_regex(p) for p in parts))
                first_by_length.setdefault(len(parts[0]), []).append(token_regex(parts[0]))
        self.by_length = {n: re.compile("|".join(sorted(alts))) for n, alts in by_length.items()}
        self.first_by_length = {n: re.compile("|".join(sorted(set(alts)))) for n, alts in first_by_length.items()}
        self.phrases = re.compile(r"(?<!\S)(?:" + "|".join(phrases) + r")(?!\S)") if phrases else None
        self.memo: dict[str, int] = {}  # token -> its code
        self.word_memo: dict[str, int] = {}  # a word of ``_words`` -> the codes of its tokens

    def _lookup(self, token: str) -> int:
        """HIT when the token is a listed word, plus FIRST when it can begin a listed phrase."""
        code = self.memo.get(token)
        if code is None:
            regex = self.by_length.get(len(token))
            first = self.first_by_length.get(len(token))
            code = (_HIT if regex and regex.fullmatch(token) else 0) | (_FIRST if first and first.fullmatch(token) else 0)
            if len(self.memo) > 100_000:
                self.memo.clear()
            self.memo[token] = code
        return code

    def _word_code(self, word: str) -> int:
        """The codes of a word's tokens, combined; remembered per word."""
        code = 0
        for token in PROFANITY_TOKEN_RE.findall(word.lower()):
            code |= self._lookup(token)
        return _remember(self.word_memo, word, code)

    def _profane(self, token: str) -> bool:
        return bool(self._lookup(token) & _HIT)

    def find(self, text: str) -> list[str]:
        if text.isascii() and "@" not in text and "$" not in text and "*" not in text:
            # Then the tokens are the letter and digit runs of the text, each inside one of its words
            # (``_words``, which the other word-counting filters have read already): when no word holds a
            # listed word or the start of a listed phrase, nothing is found.
            memo = self.word_memo
            for word in _words(text):
                code = memo.get(word)
                if code is None:
                    code = self._word_code(word)
                if code:
                    break
            else:
                return []
        tokens = PROFANITY_TOKEN_RE.findall(text.lower())
        get, lookup = self.memo.get, self._lookup
        codes = [get(t) for t in tokens]
        if None in codes:
            codes = [lookup(t) for t in tokens]
        if not any(codes):  # most captions: no listed word and no phrase can start
            return []
        found = list(dict.fromkeys(t for t, code in zip(tokens, codes) if code & _HIT))
        # A phrase's first part matches a whole token (tokens are joined by single spaces and a part
        # cannot match one): without such a token no phrase can match, and the search is skipped.
        if self.phrases is not None and len(tokens) > 1 and any(code & _FIRST for code in codes):
            found += [m.group() for m in self.phrases.finditer(" ".join(tokens))]
        return found[:MAX_LISTED]


_HIT, _FIRST = 1, 2


@lru_cache(maxsize=8)
def _profanity_index(extra: tuple, allowed: tuple) -> _ProfanityIndex:
    from better_profanity import Profanity
    from better_profanity.utils import get_complete_path_of_file, read_wordlist

    char_map = Profanity(words=["-"]).CHARS_MAPPING  # the package's substitutions, without building its list
    words = {w.lower() for w in read_wordlist(get_complete_path_of_file("profanity_wordlist.txt"))}
    words |= {w.strip().lower() for w in extra if w.strip()}
    words -= {w.strip().lower() for w in allowed}
    return _ProfanityIndex(words, char_map)


@register
class ProfanityFilter(TextFilter):
    name = "profanity"
    label = "Profanity"
    description = ("Drops candidates containing a word of better_profanity's list (with its character "
                   "substitutions), plus the curator's extra words, minus the allowed words.")
    defaults = {
        "extra_words": [],
        # Words of the list with an ordinary, descriptive sense in image captions.
        "allow_words": ["gay", "kill", "kills", "drunk", "hell", "screw", "knob", "wang", "hooker", "cock"],
    }

    def prepare(self):
        self.index = _profanity_index(tuple(self.params["extra_words"]), tuple(self.params["allow_words"]))

    def decide(self, item):
        found = self.index.find(item.text)
        return drop("profanity", words=found) if found else keep()


# --- Length ---------------------------------------------------------------------------------------

@register
class CaptionLength(TextFilter):
    name = "caption_length"
    label = "Caption length"
    description = "Drops captions with too few or too many words, or too many characters. Score: the word count."
    # Conceptual Captions alt-text: 3 to 50 words. max_chars guards against pathological input (a 1 MB
    # caption, a data: URI) before counting words; at 5000 it leaves room for museum descriptions, whose
    # preset raises max_tokens.
    defaults = {"min_tokens": 3, "max_tokens": 50, "max_chars": 5000}
    score_thresholds = ("min_tokens", "max_tokens")

    def decide(self, item):
        if len(item.text) > self.params["max_chars"]:
            return drop("too_many_chars", chars=len(item.text))
        n = len(_words(item.text))
        if n < self.params["min_tokens"]:
            return drop("too_short", score=n, tokens=n)
        if n > self.params["max_tokens"]:
            return drop("too_long", score=n, tokens=n)
        return keep(score=n, tokens=n)
