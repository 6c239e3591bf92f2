"""Conceptual Captions text filters (seed 002, Section 3, "Text-based Filtering").

The paper annotates alt-text with the Google Cloud Natural Language APIs (part of speech, polarity,
profanity) and applies heuristics on top; here the same heuristics run on spaCy part-of-speech tags
(parsed once per distinct text by the executor), wordfreq (the vocabulary of known words),
vaderSentiment (polarity), better_profanity's word list (profanity) and lingua (language).

Every filter gives every string a decision with a reason: empty text, emoji-only text, markup (plain
text here: "<script>" is just characters that fail the filters), other languages and a 1 MB caption.
Heavy resources (the language detector, the VADER lexicon, the profanity index, the stop words) are
imported lazily and built once per process: web processes that only list filters never load them.
"""
from __future__ import annotations

import re
from functools import lru_cache

from .base import KEEP, Decision, Filter, Item, drop, keep
from .registry import register

# A word: letters/digits/underscore runs joined by in-word hyphens, apostrophes or dots
# ("ZK-AHS", "Morey's", "06.01.2010", "DSC_2481" are one word each).
WORD_RE = re.compile(r"\w+(?:[-'’.]\w+)*")
LETTER_RE = re.compile(r"[^\W\d_]")
DIGIT_RE = re.compile(r"\d")
# Twitter-style hashtags and handles: the paper names "Twitter hash-tag terms" among what to discard.
HASHTAG_RE = re.compile(r"(?<![\w&])[#@][^\W\d_][\w]*")
MAX_LISTED = 20  # offending tokens listed in a decision's details (a 1 MB text stays a small row)


def _blank(text: str | None) -> bool:
    return not text or not text.strip()


def _words(text: str) -> list[str]:
    return WORD_RE.findall(text)


def _content_tokens(doc) -> list:
    return [t for t in doc if not (t.is_punct or t.is_space)]


def _unparsed(item: Item) -> Decision | None:
    """The decision of a filter that needs a parse, where there is nothing to parse or no parse."""
    if _blank(item.text):
        return drop("empty")
    if item.doc is None:  # e.g. a text longer than spaCy's max_length, left unparsed
        return drop("not_parsed", chars=len(item.text))
    return None


# --- Boilerplate ----------------------------------------------------------------------------------

# Separators that surround boilerplate: "... gear down - Stock Image", "Stock Photo | ...", "(photo by X)".
SEP = r"\s\-–—|:•·,;.!?/\\~*()\[\]{}"
HARD_SEP = r"\-–—|:•·,;.!?/\\~()\[\]{}"
SUFFIX_WINDOW = 400  # suffix patterns are searched in the last characters only (1 MB texts stay fast)
WILDCARD_CHARS = 120  # "photo by ..." crops at most this many characters after the phrase


def _phrase_regex(phrase: str) -> str:
    words = [re.escape(w) for w in re.split(r"[\s\-_]+", phrase.strip()) if w]
    body = r"[\s\-_]+".join(words)
    left = r"(?<!\w)" if re.match(r"\w", phrase.strip()) else ""
    right = r"(?!\w)" if re.search(r"\w$", phrase.strip()) else ""
    return left + body + right


def _split_patterns(phrases) -> tuple[list[str], list[str]]:
    """Plain phrases and wildcard phrases ("photo by ..." matches the phrase and what follows it)."""
    plain, wild = [], []
    for phrase in sorted({str(p).strip().lower() for p in phrases if str(p).strip()}, key=len, reverse=True):
        if phrase.endswith("..."):
            if phrase[:-3].strip():
                wild.append(_phrase_regex(phrase[:-3]))
        else:
            plain.append(_phrase_regex(phrase))
    return plain, wild


@lru_cache(maxsize=32)
def _crop_regexes(prefixes: tuple, suffixes: tuple):
    flags = re.IGNORECASE
    pre_plain, pre_wild = _split_patterns(prefixes)
    suf_plain, suf_wild = _split_patterns(suffixes)
    alts = []
    if pre_plain:
        alts.append("(?:" + "|".join(pre_plain) + ")")
    if pre_wild:  # a wildcard prefix runs to the next hard separator, which must be there
        alts.append("(?:" + "|".join(pre_wild) + f")[^{HARD_SEP}\\n]{{0,{WILDCARD_CHARS}}}(?=[{HARD_SEP}])")
    prefix = re.compile(f"[{SEP}]*(?:{'|'.join(alts)})[{SEP}]*", flags) if alts else None
    suffix = re.compile(f"[{SEP}]*(?:{'|'.join(suf_plain)})[{SEP}]*$", flags) if suf_plain else None
    # A wildcard suffix must follow a hard separator (or start the text): "A dog. Photo by Ann Lee"
    # crops, "Children pose for a photo by the lake" does not.
    wild = (re.compile(f"(?P<lead>[{SEP}]*)(?:{'|'.join(suf_wild)})[^\\n]{{0,{WILDCARD_CHARS}}}$", flags)
            if suf_wild else None)
    return prefix, suffix, wild


def _crop_bounds(text: str, prefix, suffix, wild) -> tuple[int, int]:
    """(a, b): text[a:b] is what remains after repeatedly cropping boilerplate at both ends."""
    a, b = 0, len(text)
    for _ in range(10):  # "Stock Photo - Royalty Free: ..." needs two rounds
        start = (a, b)
        if prefix is not None:
            m = prefix.match(text, a, b)
            if m and m.end() > a:
                a = m.end()
        window = max(a, b - SUFFIX_WINDOW)
        if suffix is not None and b > a:
            m = suffix.search(text, window, b)
            if m:
                b = m.start()
        if wild is not None and b > a:
            pos = window
            while True:
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
        regexes = _crop_regexes(tuple(self.params["prefixes"]), tuple(self.params["suffixes"]))
        return [self._crop(item, *regexes) for item in items]

    @staticmethod
    def _crop(item: Item, prefix, suffix, wild) -> Decision:
        text = item.text or ""
        if _blank(text):
            return drop("empty")
        a, b = _crop_bounds(text, prefix, suffix, wild)
        if (a, b) == (0, len(text)):
            return Decision(KEEP, "unchanged")
        kept = text[a:b]
        a += len(kept) - len(kept.lstrip())
        b -= len(kept) - len(kept.rstrip())
        removed = [s for s in (text[:a], text[b:]) if s.strip()]
        spans = [(s, e) for s, e in ((0, a), (max(a, b), len(text))) if e > s]
        # Spans are relative to raw_text; after an earlier transform they are shifted when the working
        # text is still a piece of the raw text, and left out otherwise.
        offset = 0 if item.text == item.raw_text else (item.raw_text or "").find(text)
        if offset >= 0:
            item.removed_spans.extend((s + offset, e + offset) for s, e in spans)
        if a >= b:
            return drop("empty_after_crop", removed=[r[:200] for r in removed])
        return Decision(KEEP, "cropped", details={"removed": [r[:200] for r in removed]}, text=text[a:b])


@lru_cache(maxsize=32)
def _drop_regexes(patterns: tuple):
    plain, wild = _split_patterns(patterns)
    alts = "|".join(plain + wild)
    if not alts:
        return None, None
    start = re.compile(f"[{SEP}\"'“”‘’]*(?P<p>{alts})", re.IGNORECASE)
    end = re.compile(f"(?P<p>{alts})[{SEP}\"'“”‘’]*$", re.IGNORECASE)
    return start, end


@register
class BoilerplateDrop(Filter):
    name = "boilerplate_drop"
    label = "Drop boilerplate"
    description = ("Drops texts that begin or end with boilerplate patterns such as \"embedded image "
                   "permalink\" or \"profile photo\" (case-insensitive, curator-editable).")
    defaults = {
        "patterns": ["embedded image permalink", "profile photo", "profile picture", "see more", "view image",
                     "image result for", "click here", "read more", "no image available", "image not found",
                     "image unavailable", "placeholder image", "default avatar", "user avatar"],
    }

    def apply(self, items: list[Item]) -> list[Decision]:
        start, end = _drop_regexes(tuple(self.params["patterns"]))
        out = []
        for item in items:
            text = item.text or ""
            if _blank(text):
                out.append(drop("empty"))
                continue
            m = start.match(text) if start else None
            where = "start"
            if not m and end is not None:
                m = end.search(text, max(0, len(text) - SUFFIX_WINDOW))
                where = "end"
            out.append(drop("boilerplate", pattern=m.group("p"), where=where) if m else keep())
        return out


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
class LanguageFilter(Filter):
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
        # start with a capital (after the first word) when there are at least this many; else the whole text.
        "min_lowercase_words": 3,
        "max_chars": 1000,  # detection reads the first characters only
    }

    def apply(self, items: list[Item]) -> list[Decision]:
        accepted = {c.lower() for c in self.params["languages"]}
        codes = tuple(sorted({c.lower() for c in self.params["candidates"]} | accepted))
        detector = None
        out = []
        for item in items:
            text = (item.text or "")[: self.params["max_chars"]]
            if _blank(text):
                out.append(drop("empty"))
                continue
            if not LETTER_RE.search(text):
                out.append(drop("no_letters"))
                continue
            detector = detector or _language_detector(codes)
            values = detector.compute_language_confidence_values(self._sample(text))
            if not values or values[0].value <= 0:
                out.append(drop("unknown_language"))
                continue
            top = values[0]
            top_code = top.language.iso_code_639_1.name.lower()
            best = max((v.value for v in values if v.language.iso_code_639_1.name.lower() in accepted), default=0.0)
            relative = round(best / top.value, 4)
            details = {"language": top_code, "confidence": round(top.value, 4)}
            if relative >= self.params["min_relative_confidence"]:
                out.append(keep(score=relative, **details))
            else:
                out.append(drop("wrong_language", score=relative, **details))
        return out

    def _sample(self, text: str) -> str:
        words = _words(text)
        lower = [w for w in words[1:] if not w[0].isupper()]
        if sum(1 for w in lower if LETTER_RE.search(w)) >= self.params["min_lowercase_words"]:
            return " ".join(lower)
        return text


# --- Part of speech -------------------------------------------------------------------------------

@register
class PosPresence(Filter):
    name = "pos_presence"
    label = "Determiner, noun, preposition"
    description = ("Drops candidates with no determiner, no noun or no preposition. Nouns include proper nouns: "
                   "the paper's annotator (Google Cloud NL) tags both NOUN and marks properness separately.")
    needs = frozenset({"pos"})
    defaults = {"require_determiner": True, "require_noun": True, "require_preposition": True,
                "proper_nouns_are_nouns": True}

    def apply(self, items: list[Item]) -> list[Decision]:
        noun_tags = {"NOUN", "PROPN"} if self.params["proper_nouns_are_nouns"] else {"NOUN"}
        checks = [("determiner", "require_determiner", {"DET"}), ("noun", "require_noun", noun_tags),
                  ("preposition", "require_preposition", {"ADP"})]
        out = []
        for item in items:
            early = _unparsed(item)
            if early is not None:
                out.append(early)
                continue
            tags = {t.pos_ for t in item.doc}
            missing = [what for what, param, wanted in checks if self.params[param] and not tags & wanted]
            if missing:
                out.append(drop(f"no_{missing[0]}", missing=missing))
            else:
                out.append(keep())
        return out


@register
class NounRatio(Filter):
    name = "noun_ratio"
    label = "Noun ratio"
    description = "Drops candidates whose share of nouns among the tokens (punctuation excluded) is too high."
    needs = frozenset({"pos"})
    # 0.8: the alt-texts the paper keeps (Table 1, Figure 1) measure 0.42-0.74 with spaCy's tags (proper
    # nouns counted, as its annotator does; en_core_web_sm tags "adorn" and "derelict" in the McKellar
    # example as nouns), while title-like keyword strings ("Boston Red Sox Baseball Cap For Sale",
    # "DH89 Dragon Rapide ZK-AHS, MOTAT, Auckland") measure 0.83-1.0.
    defaults = {"max_ratio": 0.8, "proper_nouns_are_nouns": True}

    def apply(self, items: list[Item]) -> list[Decision]:
        noun_tags = {"NOUN", "PROPN"} if self.params["proper_nouns_are_nouns"] else {"NOUN"}
        out = []
        for item in items:
            early = _unparsed(item)
            if early is not None:
                out.append(early)
                continue
            tokens = _content_tokens(item.doc)
            if not tokens:
                out.append(drop("no_words"))
                continue
            nouns = sum(t.pos_ in noun_tags for t in tokens)
            ratio = round(nouns / len(tokens), 4)
            if ratio > self.params["max_ratio"]:
                out.append(drop("high_noun_ratio", score=ratio, nouns=nouns, tokens=len(tokens)))
            else:
                out.append(keep(score=ratio, nouns=nouns, tokens=len(tokens)))
        return out


# --- Word statistics ------------------------------------------------------------------------------

@register
class UniqueWordRatio(Filter):
    name = "unique_word_ratio"
    label = "Unique-word ratio"
    description = "Drops candidates whose distinct (lower-cased) words are too small a share of their words."
    # 0.5: ordinary sentences with repeated function words ("A view of the city of London from the top of
    # the tower") stay above 0.65; keyword spam ("sale sale cheap sale") falls below.
    defaults = {"min_ratio": 0.5}

    def apply(self, items: list[Item]) -> list[Decision]:
        out = []
        for item in items:
            words = [w.lower() for w in _words(item.text or "")]
            if not words:
                out.append(drop("empty" if _blank(item.text) else "no_words"))
                continue
            unique = len(set(words))
            ratio = round(unique / len(words), 4)
            if ratio < self.params["min_ratio"]:
                out.append(drop("low_unique_ratio", score=ratio, unique=unique, words=len(words)))
            else:
                out.append(keep(score=ratio, unique=unique, words=len(words)))
        return out


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


@register
class TokenRepetition(Filter):
    name = "token_repetition"
    label = "Token repetition"
    description = ("Drops candidates where a content word (not a stop word, not a number) occurs more than "
                   "max_repeats times, or where repeated occurrences are too large a share of the content words.")
    # rate = 1 - distinct/total over content words. "A dog chases another dog" is 0.33 and stays;
    # "cheap shoes, cheap boots, cheap bags" is 0.5 and goes.
    defaults = {"max_repeats": 2, "max_rate": 0.4}

    def apply(self, items: list[Item]) -> list[Decision]:
        stop = _stop_words()
        out = []
        for item in items:
            words = _words(item.text or "")
            if not words:
                out.append(drop("empty" if _blank(item.text) else "no_words"))
                continue
            content = [w.lower() for w in words if LETTER_RE.search(w) and w.lower() not in stop]
            counts: dict[str, int] = {}
            for w in content:
                counts[w] = counts.get(w, 0) + 1
            rate = round(1 - len(counts) / len(content), 4) if content else 0.0
            token, most = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
            if most > self.params["max_repeats"]:
                out.append(drop("repeated_token", score=rate, token=token[:100], count=most))
            elif rate > self.params["max_rate"]:
                out.append(drop("high_repetition", score=rate, token=token[:100], count=most))
            else:
                out.append(keep(score=rate))
        return out


@register
class Capitalisation(Filter):
    name = "capitalisation"
    label = "Capitalisation"
    description = ("Drops candidates whose first word is not capitalised, or with too high a share of capitalised "
                   "words (title-case SEO strings). Words starting with a digit count as neither.")
    # 0.8: the alt-texts the paper keeps are full of names yet measure 0.6-0.73 ("Musician Justin Timberlake
    # performs at the 2017 Pilgrimage Music & Cultural Festival ..." is 0.67; "Actor Tom Hanks arrives at
    # the Academy Awards in Los Angeles" 0.73), while title-case strings measure 0.85-1.0.
    defaults = {"require_first_capitalised": True, "max_capitalised_ratio": 0.8}

    def apply(self, items: list[Item]) -> list[Decision]:
        out = []
        for item in items:
            words = _words(item.text or "")
            if not words:
                out.append(drop("empty" if _blank(item.text) else "no_words"))
                continue
            lettered = [w for w in words if LETTER_RE.match(w)]
            capitalised = sum(w[0].isupper() for w in lettered)
            ratio = round(capitalised / len(lettered), 4) if lettered else 0.0
            first = words[0]
            if self.params["require_first_capitalised"] and LETTER_RE.match(first) and not first[0].isupper():
                out.append(drop("first_not_capitalised", score=ratio, first_word=first[:100]))
            elif ratio > self.params["max_capitalised_ratio"]:
                out.append(drop("too_many_capitalised", score=ratio, capitalised=capitalised, words=len(lettered)))
            else:
                out.append(keep(score=ratio))
        return out


# --- Vocabulary -----------------------------------------------------------------------------------

@lru_cache(maxsize=200_000)
def _zipf(word: str, language: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language)


def _name_like(token) -> bool:
    """A proper noun spelled as a name ("Balakot", "McKellar", "O'Neill"), not a code ("DSC_2481", "A319")."""
    text = token.text
    return token.pos_ == "PROPN" and text[:1].isupper() and all(c.isalpha() or c in "'’.-" for c in text)


@register
class UnknownTokens(Filter):
    name = "unknown_tokens"
    label = "Unknown tokens"
    description = ("Every word must be in a vocabulary of known words: wordfreq's Zipf frequency >= min_zipf. "
                   "Hashtags and @handles count as unknown. Score: the Zipf frequency of the rarest word.")
    needs = frozenset({"pos"})
    defaults = {
        "language": "en",
        # wordfreq lists words down to Zipf 1.0. At 1.5, ordinary words ("floret" 1.76, "tessellated" 1.74)
        # and places the paper keeps ("Flockhart" 1.89) pass, while camera file names ("DSC_2481", "IMG_4663"
        # 0.0), rare misspellings ("photgraph", "amazng" 0.0) and hashtag words ("instagood" 1.42) fail.
        # Frequent misspellings ("definately" 2.87) are in any web vocabulary, the paper's included.
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

    def apply(self, items: list[Item]) -> list[Decision]:
        language = self.params["language"]
        skip_names = self.params["ignore_proper_nouns"]
        out = []
        for item in items:
            text = item.text or ""
            if _blank(text):
                out.append(drop("empty"))
                continue
            if item.doc is not None:
                words = [t.text for t in item.doc if not (skip_names and _name_like(t))]
            else:  # unparsed (too long to parse): every word is checked
                words = _words(text)
            unknown: list[str] = list(dict.fromkeys(m.group() for m in HASHTAG_RE.finditer(text)))[:MAX_LISTED]
            tagged = {u[1:].lower() for u in unknown}  # "#instagood" is listed once, not again as "instagood"
            rarest, rarest_word, checked = None, "", 0
            for word in words:
                if not LETTER_RE.search(word):
                    continue
                checked += 1
                z = _zipf(word.lower(), language)
                threshold = self.params["min_zipf_with_digits"] if DIGIT_RE.search(word) else self.params["min_zipf"]
                if z < threshold and len(unknown) < MAX_LISTED and word not in unknown and word.lower() not in tagged:
                    unknown.append(word)
                if rarest is None or z < rarest:
                    rarest, rarest_word = z, word
            if not checked and not unknown:
                # Names only (skipped) count as known; no letters at all is no text to judge.
                out.append(keep(score=None, checked=0) if LETTER_RE.search(text) else drop("no_words"))
            elif unknown:
                out.append(drop("unknown_tokens", score=rarest, unknown=[u[:100] for u in unknown[:MAX_LISTED]]))
            else:
                out.append(keep(score=rarest, rarest=rarest_word[:100], checked=checked))
        return out


# --- Polarity and profanity -----------------------------------------------------------------------

@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


@register
class Polarity(Filter):
    name = "polarity"
    label = "Polarity"
    description = "Drops candidates whose VADER compound polarity is extreme (too negative or too positive)."
    # VADER's compound saturates as sentiment words pile up: one strong word ("A beautiful sunset over the
    # lake") gives about 0.6, the paper's news-like alt-texts 0.5-0.65; beyond +/-0.8 takes two or more
    # strong words or intensifiers ("A beautiful smiling happy bride with lovely flowers" 0.94), which is
    # promotion or emotion rather than description.
    defaults = {"min_compound": -0.8, "max_compound": 0.8, "max_chars": 2000}  # VADER is quadratic: read a prefix

    def apply(self, items: list[Item]) -> list[Decision]:
        analyser = None
        out = []
        for item in items:
            text = item.text or ""
            if _blank(text):
                out.append(drop("empty"))
                continue
            analyser = analyser or _vader()
            sample = text[: self.params["max_chars"]]
            compound = round(analyser.polarity_scores(sample)["compound"], 4)
            details = {"truncated": True} if len(sample) < len(text) else {}
            if compound <= self.params["min_compound"]:
                out.append(drop("too_negative", score=compound, **details))
            elif compound >= self.params["max_compound"]:
                out.append(drop("too_positive", score=compound, **details))
            else:
                out.append(keep(score=compound, **details))
        return out


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
        phrases = []
        for word in words:
            parts = PROFANITY_TOKEN_RE.findall(word)
            if len(parts) == 1:
                by_length.setdefault(len(parts[0]), []).append(token_regex(parts[0]))
            elif parts:
                phrases.append(" ".join(token_regex(p) for p in parts))
        self.by_length = {n: re.compile("|".join(sorted(alts))) for n, alts in by_length.items()}
        self.phrases = re.compile(r"(?<!\S)(?:" + "|".join(phrases) + r")(?!\S)") if phrases else None
        self.memo: dict[str, bool] = {}

    def _profane(self, token: str) -> bool:
        hit = self.memo.get(token)
        if hit is None:
            regex = self.by_length.get(len(token))
            hit = bool(regex and regex.fullmatch(token))
            if len(self.memo) > 100_000:
                self.memo.clear()
            self.memo[token] = hit
        return hit

    def find(self, text: str) -> list[str]:
        tokens = PROFANITY_TOKEN_RE.findall(text.lower())
        found = list(dict.fromkeys(t for t in tokens if self._profane(t)))
        if self.phrases is not None and len(tokens) > 1:
            found += [m.group() for m in self.phrases.finditer(" ".join(tokens))]
        return found[:MAX_LISTED]


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
class ProfanityFilter(Filter):
    name = "profanity"
    label = "Profanity"
    description = ("Drops candidates containing a word of better_profanity's list (with its character "
                   "substitutions), plus the curator's extra words, minus the allowed words.")
    defaults = {
        "extra_words": [],
        # Words of the list with an ordinary, descriptive sense in image captions.
        "allow_words": ["gay", "kill", "kills", "drunk", "hell", "screw", "knob", "wang", "hooker", "cock"],
    }

    def apply(self, items: list[Item]) -> list[Decision]:
        index = None
        out = []
        for item in items:
            text = item.text or ""
            if _blank(text):
                out.append(drop("empty"))
                continue
            index = index or _profanity_index(tuple(self.params["extra_words"]), tuple(self.params["allow_words"]))
            found = index.find(text)
            out.append(drop("profanity", words=found) if found else keep())
        return out


# --- Length ---------------------------------------------------------------------------------------

@register
class CaptionLength(Filter):
    name = "caption_length"
    label = "Caption length"
    description = "Drops captions with too few or too many words, or too many characters. Score: the word count."
    defaults = {"min_tokens": 3, "max_tokens": 50, "max_chars": 500}

    def apply(self, items: list[Item]) -> list[Decision]:
        out = []
        for item in items:
            text = item.text or ""
            if _blank(text):
                out.append(drop("empty", score=0))
                continue
            if len(text) > self.params["max_chars"]:
                out.append(drop("too_many_chars", chars=len(text)))
                continue
            n = len(_words(text))
            if n < self.params["min_tokens"]:
                out.append(drop("too_short", score=n, tokens=n))
            elif n > self.params["max_tokens"]:
                out.append(drop("too_long", score=n, tokens=n))
            else:
                out.append(keep(score=n, tokens=n))
        return out

