"""Profanity: better_profanity's word list and substitutions, matched per token."""
from __future__ import annotations

import re
from functools import lru_cache

from ..base import drop, keep
from ..registry import register
from .common import MAX_LISTED, TextFilter, remember
from .common import words as _words

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
        return remember(self.word_memo, word, code)

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
