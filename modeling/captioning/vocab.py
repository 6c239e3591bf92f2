"""Word vocabulary with a minimum count (rarer words -> UNK) and captions truncated to 15 tokens
(seeds 002 and 004)."""
from __future__ import annotations

import re
from collections import Counter

PAD, START, END, UNK = "<pad>", "<start>", "<end>", "<unk>"
SPECIALS = (PAD, START, END, UNK)
MAX_TOKENS = 15
MIN_COUNT = 5

# Words of letters/digits (with an inner apostrophe), and single CJK characters, which have no spaces.
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+(?:'[^\W_]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; punctuation is dropped."""
    return _TOKEN.findall((text or "").lower())


class Vocab:
    def __init__(self, words: list[str]):
        self.itos = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    pad_id, start_id, end_id, unk_id = 0, 1, 2, 3

    @classmethod
    def build(cls, texts, min_count: int = MIN_COUNT, max_tokens: int = MAX_TOKENS) -> "Vocab":
        """Words seen at least ``min_count`` times (in the first ``max_tokens`` tokens of each text),
        most frequent first, ties alphabetically, so the same texts always give the same vocabulary."""
        counts = Counter()
        for text in texts:
            counts.update(tokenize(text)[:max_tokens])
        words = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        return cls(words)

    def __len__(self):
        return len(self.itos)

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        """[START] + ids of the first ``max_tokens`` tokens (UNK when unknown) + [END]."""
        ids = [self.stoi.get(w, self.unk_id) for w in tokenize(text)[:max_tokens]]
        return [self.start_id] + ids + [self.end_id]

    def decode(self, ids) -> str:
        words = []
        for i in ids:
            i = int(i)
            if i == self.end_id:
                break
            if i in (self.pad_id, self.start_id):
                continue
            words.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return " ".join(words)

    def to_json(self) -> list[str]:
        return list(self.itos)

    @classmethod
    def from_json(cls, itos: list[str]) -> "Vocab":
        if list(itos[:len(SPECIALS)]) != list(SPECIALS):
            raise ValueError("not a captioning vocabulary: the special tokens are missing")
        return cls(list(itos[len(SPECIALS):]))
