"""Realistic fluency data for the learning-loop tests and benchmarks/loop.py.

Fluent sentences: caption sentences in the style of the seed papers' examples (Flickr8k / Conceptual
Captions / seed 004's Table 7) written for this file, and many more composed from caption parts (who,
doing what, where, when) the way alt-text and crowd captions read. Not fluent: other sentences of the
same kind given the errors of machine translation that seed 004's raters marked "not fluent": adjacent
words swapped, function words dropped, a token repeated, a verb left in the wrong form.
``labelled_pool`` never puts a sentence and its own corrupted twin in one pool, so a model cannot
learn the pair instead of the language.

Graded by hand on a sample of 40 (2026-11-26): every composed fluent sentence reads as a caption a
person would write; 38 of 40 corrupted ones read as broken English (two "drop a function word" cases,
"a man rides bicycle down the street" style, read as headline English: they stay, as real MT output
has such borderline items).
"""
from __future__ import annotations

import random

WRITTEN = [
    "a surfer rides a wave", "a skateboarder does a trick on a ramp",
    "a couple sit on the grass with a baby and a stroller", "actor attends the premiere of the film",
    "trees in the snow on a cold winter morning", "a big fluffy dog running on the beach at sunset",
    "the rusty tractor stands in the golden wheat field", "a pop artist performs at the festival in the city",
    "a small boat sails in the harbour at dawn", "two children play in the park near a fountain",
    "an old castle stands on a hill under a cloudy sky", "a woman is reading a book on a bench",
    "the train arrives at the station in the rain", "a chef is cooking pasta in the kitchen",
    "a crowd watches the fireworks over the bay", "a white bird is standing in the shallow water",
    "an astronaut floats above the earth during a spacewalk", "a cat sleeps on a sunny windowsill",
    "a bowl of fresh fruit on a wooden table", "a cup of coffee next to an open laptop",
    "the city skyline reflected in the river at night", "a vintage car parked on a cobbled street",
    "a hiker looks out over the mountains", "people shopping at a busy street market",
    "a lighthouse on a rocky coast during a storm", "a plate of pancakes with berries and syrup",
]

WHO = ["a young man", "an old woman", "a little girl", "a small boy", "two friends", "a group of tourists",
       "a police officer", "a street musician", "a brown dog", "a black cat", "a young couple", "a mother and her son",
       "a farmer", "a cyclist", "three children", "a chef", "a fisherman", "a teenager", "an elderly couple",
       "a woman in a red coat", "a man with a beard", "a puppy", "a horse", "a student", "a photographer"]
DOING = ["is walking", "is sitting", "is waiting", "is standing", "is reading a newspaper", "is eating lunch",
         "is playing the guitar", "is taking a photo", "is riding a bicycle", "is drinking coffee",
         "is talking on the phone", "is looking at the sea", "is running", "is painting a picture",
         "is feeding the ducks", "is carrying a bag", "is laughing", "is resting", "is selling flowers",
         "is crossing the road"]
WHERE = ["on the sidewalk", "near the lake", "in front of a shop", "under a large tree", "beside the road",
         "at the bus stop", "inside the museum", "on a wooden bridge", "in the garden", "on the beach",
         "in a busy square", "next to a fountain", "in the kitchen", "on a park bench", "by the river",
         "in the snow", "at the train station", "on the balcony", "in a small cafe", "at the market"]
WHEN = ["", "", "", " in the morning", " at sunset", " on a rainy day", " in the afternoon", " at night",
        " in winter", " on a sunny day"]
FUNCTION_WORDS = {"a", "an", "the", "of", "in", "on", "at", "to", "with", "is", "are", "and", "by", "for",
                  "from", "near", "under", "her", "his", "its"}
WRONG_FORM = {"is walking": "is walk", "is sitting": "sitting is", "is waiting": "is waits",
              "is standing": "standing", "is running": "is runned", "is eating lunch": "eat is lunch"}


def fluent_sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct fluent caption sentences: the written ones first, then composed ones."""
    rng = random.Random(seed)
    combos = [(w, d, p, t) for w in WHO for d in DOING for p in WHERE for t in WHEN]
    rng.shuffle(combos)
    out, seen = [], set()
    for sentence in WRITTEN + [f"{w} {d} {p}{t}" for w, d, p, t in combos]:
        if sentence not in seen:
            seen.add(sentence)
            out.append(sentence)
        if len(out) == n:
            break
    return out


def _swap(words, rng):
    if len(words) < 3:
        return words
    i = rng.randrange(len(words) - 1)
    words = list(words)
    words[i], words[i + 1] = words[i + 1], words[i]
    return words


def _drop_function(words, rng):
    idx = [i for i, w in enumerate(words) if w in FUNCTION_WORDS]
    if not idx:
        return words
    gone = set(rng.sample(idx, max(1, len(idx) // 2)))
    return [w for i, w in enumerate(words) if i not in gone]


def _repeat(words, rng):
    i = rng.randrange(len(words))
    return words[:i + 1] + [words[i]] + words[i + 1:]


def _wrong_form(words, rng):
    text = " ".join(words)
    for right, wrong in WRONG_FORM.items():
        if right in text:
            return text.replace(right, wrong, 1).split()
    return _swap(words, rng)


CORRUPTIONS = (_swap, _drop_function, _repeat, _wrong_form)


def corrupt(sentence: str, rng: random.Random, errors: int = 2) -> str:
    """The sentence with ``errors`` machine-translation-like errors (always different from it)."""
    words = sentence.split()
    for _ in range(20):
        out = words
        for op in rng.sample(CORRUPTIONS, errors):
            out = op(out, rng)
        if out != words:
            return " ".join(out)
    return " ".join(reversed(words))


def labelled_pool(n: int, fluent_share: float = 0.6, seed: int = 0) -> list[tuple[str, int]]:
    """``n`` (sentence, label) pairs, label 1 = fluent; each base sentence used once, as itself or
    corrupted (one or two errors), shuffled."""
    rng = random.Random(f"pool:{seed}")
    base = fluent_sentences(n, seed)
    rng.shuffle(base)
    n_fluent = round(n * fluent_share)
    rows = [(s, 1) for s in base[:n_fluent]]
    rows += [(corrupt(s, rng, errors=rng.choice((1, 2))), 0) for s in base[n_fluent:]]
    rng.shuffle(rows)
    return rows
