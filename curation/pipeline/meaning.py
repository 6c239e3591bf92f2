"""Same words or same meaning? Checks on a pair of captions that a sentence encoder puts close together.

A bi-encoder's cosine is high for captions that share their words, whatever those words do: "A dog chases a
cat" and "A cat chases a dog" sit at 0.97 with all-MiniLM-L6-v2, above most paraphrases; and it is only middling
for a paraphrase that rewords ("Protesters gathered outside the embassy" / "On Saturday demonstrators assembled in
front of the embassy", 0.76). So a candidate pair (cosine at or above the step's ``min_similarity``) is compared on
the spaCy parse of each caption, and the comparison tells a CONTRADICTION, which vetoes, from REWORDING, which
only costs in proportion:

Contradictions (each a feature that outweighs any cosine):

- ``negation``: one caption negates where the other does not (``neg`` dependents, "no", "without", "never"...),
  or a word is the other's with a negating prefix ("signed" / "unsigned");
- ``numbers``: the numerals differ (digits, number words, ordinals, times, decades, "a pair of"), or the same
  numeral counts different nouns of a coordination ("two women and a man" / "two men and a woman"); quantifiers
  (a closed class: all / some / many / few) count with them;
- ``role_swap``: two nouns trade places. Each noun's place is read from the dependencies as (relation, head):
  agent or patient of a verb (passives, "by" agents, participle clauses, and relative clauses through their
  pronoun: "the girl who chased the goose" has the girl as agent), possessor or "of" phrase (alike: "the bakery's
  owner" = "the owner of the bakery"), object of a preposition, compound; the pair is a swap when each noun of
  the one caption hangs where the other hung in the other ("a boy on the shoulders of his father" / "a father on
  the shoulders of his boy"), or when a noun that modifies another is modified by it ("milk chocolate");
- ``substituted``: a content word left over after alignment (below) that sits in the same place of the sentence
  as a leftover word of the other caption: the same relation to corresponding heads in the parses, or, where the
  parser reads the two sentences differently, the same content words either side of it. The rest of the sentence
  being the same, a different word there changes what is said, however close the encoder puts the two words:
  this is how antonyms ("cheap" / "expensive", 0.80) and co-hyponyms ("violin" / "trumpet") are caught, with no
  list of them. Contrasting compounds ("upstairs" / "downstairs") and opposite prepositions or particles on the
  same object (the closed class OPPOSITE: "above" / "below the bridge", "coming in" / "going out") count here.

Rewording (``added``, the share of both captions' content the other does not cover, 0..1): the content words
(nouns, proper nouns, adjectives, verbs, adverbs, without numerals, negations and stop words) are aligned by
lemma, by derived form ("protest" / "protester", "decorate" / "decoration", "heat" / "preheat"), by split compound
("sandcastle" / "sand castle"), then by near synonym: the encoder's vectors of the lemmas or of the forms the
captions use ("protesters" / "demonstrators" 0.83 where the lemmas are at 0.41) at cosine >= ``synonym``,
adjectives ADJECTIVE_MARGIN more (gradable antonyms sit close). An aligned word covers 1; a word not aligned
covers its best counterpart's similarity (the greedy soft matching of BERTScore, Zhang et al. 2020, "BERTScore:
Evaluating Text Generation with BERT"). A detail one caption adds, a verb said another way in another clause,
lower the coverage a little; different content lowers it a lot.

Each check is a feature of the pair (FEATURES); ``PairScorer`` combines them with the cosine into a logistic score
(default weights below, fitted ones from people's "same meaning?" judgements, ``fit_scorer`` in the annotation
app) and a pair is the same meaning at ``score >= threshold``. The reasons are kept in words for the review page.
What the design gives up: a synonym the encoder's word vectors do not know, in the same place ("mends" /
"repairs", "big" / "large" at 0.81 for an adjective), is read as a substitution, so that paraphrase is missed
(a reviewer's look) rather than an antonym merged (a caption lost).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


NEGATIONS = {"not", "no", "never", "without", "nobody", "nothing", "none", "neither", "nor", "n't", "nowhere"}
# Verbs that carry tense or voice rather than content, and the words captions use to frame a picture
# ("close-up of", "top view", "shown in"): neither changes what is shown.
LIGHT = {"be", "have", "do", "get", "show", "see", "view", "photo", "image", "picture", "shot",
         "also", "here", "there", "again", "just", "very", "so", "then", "now", "together"}
NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non")
NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                     "ninety": 90, "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9,
                     "dozen": 12, "single": 1, "double": 2, "pair": 2, "couple": 2})
ORDINALS = {w: i for i, w in enumerate(
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split())}
ORDINALS.update({"last": -1, "final": -1})
# Nouns that count what their "of" phrase names ("a pair of vases" = "two vases").
COUNTING_NOUNS = {"pair", "couple", "dozen", "trio", "duo"}
RELATIVE = {"who", "whom", "that", "which", "whose"}
_ORDINAL = re.compile(r"(\d+)(st|nd|rd|th)")
_CLOCK = re.compile(r"\d+([:.]\d+)+")
# Prepositions and particles are a closed class: the pairs that point opposite ways are listed once, here.
OPPOSITE = {frozenset(p) for p in (("before", "after"), ("above", "below"), ("over", "under"), ("inside", "outside"),
                                   ("in", "out"), ("into", "out"), ("up", "down"), ("on", "off"), ("toward", "away"),
                                   ("towards", "away"), ("behind", "front"), ("to", "from"),
                                   ("onto", "off"), ("upstairs", "downstairs"), ("uphill", "downhill"))}
# Gradable adjectives and their antonyms sit close in a sentence encoder's space (all-MiniLM-L6-v2: cheap /
# expensive 0.80, thin / thick 0.82, large / small 0.79) closer than nouns do: an adjective needs this much more
# to pass for a synonym (big / large, 0.81, then counts as a different word: a paraphrase missed, not a wrong merge).
ADJECTIVE_MARGIN = 0.05
# Quantifiers, a closed class, by what they claim of the set.
QUANTIFIERS = {"all": "all", "every": "all", "each": "all", "both": "all", "some": "some", "several": "some",
               "many": "many", "most": "many", "numerous": "many", "few": "few", "little": None}
AGENT, PATIENT = "agent", "patient"
SPACY_NEEDS = frozenset({"pos", "lemma", "deps"})

FEATURES = ("cosine", "negation", "numbers", "role_swap", "substituted", "added")


# --- what one caption says ------------------------------------------------------------------------

@dataclass
class Reading:
    """What the checks read from one parsed caption."""

    content: list[tuple[str, str, str]]  # (lemma, coarse part of speech, dependency slot "dep:head lemma")
    directions: set  # prepositions and particles of the closed class OPPOSITE knows
    modifiers: set  # the lemmas of adjectives and adverbs (a stricter synonym cut-off, ADJECTIVE_MARGIN)
    negations: int
    numbers: Counter  # numeral value -> count
    counted: set  # (numeral value, noun lemma it counts)
    roles: dict[str, set] = field(default_factory=dict)  # noun lemma -> {(agent or patient, verb lemma)}
    edges: set = field(default_factory=set)  # (head noun, noun that modifies it): "milk chocolate", "the dog's owner"
    quantities: set = field(default_factory=set)  # quantifier classes: "all", "some", "many", "few"
    attachments: dict = field(default_factory=dict)  # noun lemma -> {(relation, head lemma)}: where it hangs
    forms: dict = field(default_factory=dict)  # content lemma -> {lower-case surface forms} (for word vectors)
    directed: set = field(default_factory=set)  # (preposition or particle, its object's lemma or "")
    attributes: set = field(default_factory=set)  # (adjective, the noun it modifies): "young man"


def _number(token) -> str | None:
    text = token.lower_.replace(",", "")
    if text in NUMBER_WORDS and token.pos_ in ("NUM", "NOUN", "ADJ"):
        return str(NUMBER_WORDS[text])
    ordinal = _ORDINAL.fullmatch(text)
    hyphened = token.i + 1 < len(token.doc) and token.nbor(1).text == "-"
    if text in ORDINALS and hyphened:
        return None  # an idiom, not an order: "second-hand", "first-class", "third-party"
    if ordinal or (text in ORDINALS and (token.pos_ == "ADJ" or (token.pos_ in ("PROPN", "NOUN")
                                                                  and text not in ("second", "last")))):
        return f"#{ordinal.group(1) if ordinal else ORDINALS[text]}"  # "2nd" and "second" alike
    if _CLOCK.fullmatch(text) or re.fullmatch(r"\d+s", text):
        return text  # a time of day, a decade
    if token.like_num or re.fullmatch(r"\d+(\.\d+)?", text):
        try:
            value = float(text)
        except ValueError:
            return text
        return str(int(value)) if value == int(value) else str(value)
    return None


def _lemma(token) -> str:
    return (token.lemma_ or token.text).lower()


ARG_DEPS = {"nsubj", "nsubjpass", "dobj", "pobj", "dative"}


def _verb_of(token):
    """The verb (or the participle) a noun is an argument of, through prepositions ("on top of")."""
    head = token.head
    while head.pos_ not in ("VERB", "AUX") and head.dep_ in ("prep", "pobj", "agent") and head.head is not head:
        head = head.head
    return head if head.pos_ in ("VERB", "AUX") else None


def _noun_role(token) -> tuple[str, str] | None:
    """(agent or patient, the verb's lemma) of a noun; conjuncts share their head's role."""
    while token.dep_ == "conj" and token.head is not token:
        token = token.head
    dep = token.dep_
    if dep in ARG_DEPS or dep == "agent":
        verb = _verb_of(token)
        if verb is None:
            return None
        passive = verb.tag_ == "VBN" and any(c.dep_ == "agent" for c in verb.children)
        if (dep == "nsubj" and not passive) or (dep == "pobj" and token.head.dep_ == "agent"):
            return AGENT, _lemma(verb)
        return PATIENT, _lemma(verb)
    if token.pos_ in ("NOUN", "PROPN"):
        # "A dog chasing a cat": the dog acts; "A cat chased by a dog": the cat undergoes.
        for child in token.children:
            if child.dep_ == "relcl":
                # "the girl who chased the goose": the girl is what the relative pronoun is in its clause
                pronoun = next((g for g in child.children if g.lower_ in RELATIVE and g.dep_ in ARG_DEPS), None)
                if pronoun is not None:
                    passive = pronoun.dep_ == "nsubjpass"
                    return (AGENT if pronoun.dep_ == "nsubj" and not passive else PATIENT), _lemma(child)
                if any(g.dep_ in ("nsubj", "nsubjpass") for g in child.children):
                    return PATIENT, _lemma(child)  # "the cart the horse pulls"
            if child.dep_ in ("acl", "relcl") and child.pos_ == "VERB" and dep in ("ROOT", "dep", "appos", "pobj"):
                return (PATIENT if child.tag_ == "VBN" else AGENT), _lemma(child)
    return None


def _attachment(token) -> tuple[str, str] | None:
    """Where a noun hangs in its caption: (relation, head lemma). Subject and passive agent read alike, as do
    object and passive subject, and a possessor and an "of" phrase ("the bakery's owner" / "the owner of the
    bakery"); a relative clause's noun takes its relative pronoun's place ("the girl who chased the goose")."""
    while token.dep_ == "conj" and token.head is not token:
        token = token.head
    role = _noun_role(token)
    if role:
        return role
    dep, head = token.dep_, token.head
    if dep == "poss" or (dep == "pobj" and head.lower_ == "of"):
        owner = head if dep == "poss" else head.head
        return "of", _lemma(owner)
    if dep == "pobj" and head.head is not head:
        return f"prep:{head.lower_}", _lemma(head.head)
    if dep == "compound":
        return "compound", _lemma(head)
    if dep in ("ROOT", "dep", "appos"):
        return "root", ""
    return None


def _word_class(token) -> str | None:
    """"noun" (things: nouns, and any word in an argument's place, as a name tagged an adjective), "other"
    (what things are and do: adjectives, verbs, adverbs, and particles used as predicates, "the light is
    off"), or None for a word the checks do not compare."""
    if token.dep_ in ARG_DEPS and token.pos_ not in ("PRON", "DET", "NUM"):
        return "noun"
    if token.pos_ in ("NOUN", "PROPN"):
        return "noun"
    if token.pos_ in ("ADP", "ADV") and token.dep_ in ("advmod", "prt", "acomp") and (
            token.tag_ == "RP" or token.head.lemma_ == "be") and not any(c.dep_ == "pobj" for c in token.children):
        return "other"  # a particle as the predicate: "the light is on" / "off"
    if token.pos_ in ("ADJ", "VERB") or (token.pos_ == "ADV" and not token.is_stop):
        return "other"
    return None


def _noun_edge(token) -> tuple[str, str] | None:
    """(head, modifier) when a noun modifies another noun: a compound, a possessor, an "of" phrase."""
    head = token.head
    if token.dep_ == "pobj" and head.lower_ == "of" and head.head is not head:
        head = head.head
    elif token.dep_ not in ("compound", "poss"):
        return None
    if head.pos_ in ("NOUN", "PROPN") and head is not token:
        return _lemma(head), _lemma(token)
    return None


def read(doc) -> Reading:
    content, numbers, counted, roles, negations = [], Counter(), set(), {}, 0
    directions, modifiers, edges, quantities = set(), set(), set(), set()
    attachments, forms, directed, attributes = {}, {}, set(), set()
    opposable = {w for pair in OPPOSITE for w in pair}
    for token in doc:
        lower = token.lower_
        if lower in opposable:
            directions.add(lower)
            objects = [_lemma(c) for c in token.children if c.dep_ == "pobj"]
            directed.update((lower, o) for o in objects or [""])
        if QUANTIFIERS.get(lower) and token.pos_ in ("DET", "ADJ", "PRON"):
            quantities.add(QUANTIFIERS[lower])
        if token.dep_ == "neg" or lower in NEGATIONS:
            negations += 1
            continue
        value = _number(token)
        if value is not None and lower in COUNTING_NOUNS and any(c.lower_ == "of" for c in token.children):
            numbers[value] += 1  # "a pair of vases" counts as "two vases"
            continue
        if value is not None and (token.pos_ in ("NUM", "X") or token.dep_ == "nummod" or value.startswith("#")
                                  or not value.replace(".", "").isdigit()):
            numbers[value] += 1
            head = token.head
            if head is not token and head.pos_ in ("NOUN", "PROPN"):
                conj = {_lemma(c) for c in head.conjuncts}
                if conj:  # a numeral counts within a coordination: "two women and a man"
                    counted.add((value, _lemma(head)))
            continue
        kind = _word_class(token)
        lemma = _lemma(token)
        if kind is None or lemma in LIGHT or not any(ch.isalpha() for ch in lemma):
            continue
        head = token.head
        slot = (f"{token.dep_}:{_lemma(head)}" if token.dep_ != "pobj" or head.head is head
                else f"prep-{head.lower_}:{_lemma(head.head)}")  # "on the sofa": on what, of which head
        content.append((lemma, kind, slot))
        forms.setdefault(lemma, set()).add(lower)
        if token.pos_ in ("ADJ", "ADV"):
            modifiers.add(lemma)
        if token.dep_ == "amod" and token.head.pos_ in ("NOUN", "PROPN"):
            attributes.add((lemma, _lemma(token.head)))
        if kind == "noun":
            role, edge = _noun_role(token), _noun_edge(token)
            if role:
                roles.setdefault(lemma, set()).add(role)
            if edge:
                edges.add(edge)
            place = _attachment(token)
            if place:
                attachments.setdefault(lemma, set()).add(place)
    return Reading(content, directions, modifiers, negations, numbers, counted, roles, edges, quantities,
                   attachments, forms, directed, attributes)


# --- comparing two readings -----------------------------------------------------------------------

def _negating_prefix(a: str, b: str) -> bool:
    return any(a == p + b or b == p + a for p in NEGATING_PREFIXES)


def _contrasting_compounds(a: str, b: str) -> bool:
    """Words built on the same last part with different first parts ("upstairs" / "downstairs", "indoor" /
    "outdoor"): close in the encoder's space because they share it, opposite because of what differs."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n >= 3 and len(a) - n >= 2 and len(b) - n >= 2


def _related_forms(a: str, b: str) -> bool:
    """One word derived from the other: a shared stem of at least four letters and three quarters of the shorter
    word ("protest" / "protester", "decorate" / "decoration", "colourful" / "coloured", "snow" / "snowy"), or the
    shorter word whole at the end of the longer after a short prefix ("heat" / "preheat")."""
    short, long_ = sorted((a, b), key=len)
    n = 0
    while n < len(short) and a[n] == b[n]:
        n += 1
    if n >= 4 and n >= 0.75 * len(short):
        return True
    return len(short) >= 4 and long_.endswith(short) and len(long_) - len(short) <= 3


def _similarity(x: str, y: str, vectors, forms: dict) -> float:
    """The encoder's cosine of two words, the best over their lemmas and the forms the captions use
    ("protesters" / "demonstrators" 0.83 where the lemmas are at 0.41); 0 for a word without a vector."""
    best = 0.0
    for u in {x} | forms.get(x, set()):
        for v in {y} | forms.get(y, set()):
            if u in vectors and v in vectors:
                best = max(best, float(vectors[u] @ vectors[v]))
    return best


def _pair_up(a: list[str], b: list[str], sim, keep=lambda i, j: True):
    """Pairs (i, j, similarity) of a's and b's words, most similar first, each word once."""
    import numpy as np

    if not a or not b:
        return []
    sims = np.array([[sim(x, y) for y in b] for x in a])
    pairs, used_a, used_b = [], set(), set()
    for flat in np.argsort(-sims, axis=None, kind="stable"):
        i, j = divmod(int(flat), len(b))
        if i in used_a or j in used_b or not keep(i, j):
            continue
        used_a.add(i)
        used_b.add(j)
        pairs.append((i, j, float(sims[i, j])))
    return pairs


SLOT_GROUPS = {"amod": "mod", "compound": "mod", "nmod": "mod", "nummod": "mod", "ROOT": "root", "dep": "root",
               "appos": "root", "acomp": "pred", "attr": "pred", "oprd": "pred"}


def _slots(reading: Reading) -> dict[str, set]:
    out: dict[str, set] = {}
    for lemma, _, slot in reading.content:
        dep, _, head = slot.partition(":")
        group = SLOT_GROUPS.get(dep, dep)
        if group == "pred" and head == "be":
            group = "root"  # "the door is open" / "the door is closed" (a passive participle at the root)
        out.setdefault(lemma, set()).add((group, "" if group == "root" else head))
    return out


def _role_swap(a: Reading, b: Reading) -> str:
    """The reason, or "": two nouns that trade places between the captions: agent and patient of the same
    verb, or more generally each hanging where the other hung (subject, object, possessor, preposition)
    ("the boy on the shoulders of his father" / "the father on the shoulders of his boy"); or a noun that
    modifies another in one caption and is modified by it in the other, or two adjectives that trade their nouns
    ("the young man helps an old woman" / "the old man helps a young woman")."""
    shared = sorted(set(a.roles) & set(b.roles))
    for x in shared:
        for role, verb in a.roles[x]:
            if role != AGENT or (PATIENT, verb) not in b.roles[x]:
                continue
            for y in shared:
                if y != x and (PATIENT, verb) in a.roles[y] and (AGENT, verb) in b.roles[y]:
                    return f"roles swapped: '{x}' and '{y}'"
    nouns = sorted(set(a.attachments) & set(b.attachments))
    for x in nouns:
        for y in nouns:
            if x >= y:
                continue
            ax, ay, bx, by = a.attachments[x], a.attachments[y], b.attachments[x], b.attachments[y]
            traded = (ax - bx) & (by - ay) and (ay - by) & (bx - ax)
            if traded:
                return f"roles swapped: '{x}' and '{y}'"
    for head, modifier in sorted(a.edges - b.edges):
        if (modifier, head) in b.edges and (modifier, head) not in a.edges:
            return f"head and modifier swapped: '{modifier} {head}' / '{head} {modifier}'"
    moved_a, moved_b = sorted(a.attributes - b.attributes), b.attributes - a.attributes
    for m1, h1 in moved_a:  # "the young man ... an old woman" / "the old man ... a young woman"
        for m2, h2 in moved_a:
            if m1 != m2 and h1 != h2 and (m1, h2) in moved_b and (m2, h1) in moved_b:
                return f"adjectives swapped: '{m1} {h1}', '{m2} {h2}' / '{m2} {h1}', '{m1} {h2}'"
    return ""


def _renamed(reading: Reading, names: dict[str, str]) -> Reading:
    """The reading with its nouns called by the other caption's words where the two are aligned as synonyms or
    derived forms, so that swapped roles are found across a rewording ("the kid's teacher" / "the child's ...")."""
    if not names:
        return reading

    def n(w):
        return names.get(w, w)

    return Reading(reading.content, reading.directions, reading.modifiers, reading.negations, reading.numbers,
                   reading.counted, {n(k): {(r, n(v)) for r, v in v_} for k, v_ in reading.roles.items()},
                   {(n(h), n(m)) for h, m in reading.edges}, reading.quantities,
                   {n(k): {(r, n(h)) for r, h in v_} for k, v_ in reading.attachments.items()}, reading.forms,
                   reading.directed, {(n(m), n(h)) for m, h in reading.attributes})


@dataclass
class WordMatch:
    """How the content words of two captions pair up, beyond the lemmas they share."""

    prefixed: list  # (x, y): one is the other with a negating prefix
    synonyms: list  # (x, y, similarity) at or above the synonym cut-off
    contrasts: list  # (x, y, similarity): close, but contrasting compounds
    substituted: list  # (x, y, similarity): a different word of the same class in the same place
    added: list  # words only one caption has (rewording or detail)
    related: list = field(default_factory=list)  # (x, y): derived forms and split compounds
    coverage: float = 1.0  # how much of both captions' content the other covers, 0..1


def match_words(a: Reading, b: Reading, vectors, synonym: float) -> WordMatch:
    """Align the content words: the same lemma, a negating prefix, a derived form or split compound, a near
    synonym (the encoder's vectors at ``synonym``, ADJECTIVE_MARGIN more for modifiers). Of what is left, a word
    in the same place of the sentence as a word of the same class in the other caption (the same relation to
    corresponding heads: "a cheap flat" / "an expensive flat", "slices onions" / "slices bread") is
    substituted: a contradiction, whatever the encoder thinks of the two words, since the rest of the sentence
    is the same. Other leftovers are rewording or detail: they lower the ``coverage`` (each word counts what its
    best counterpart's similarity is, after BERTScore's greedy matching, Zhang et al. 2020) but veto nothing."""
    forms = {**a.forms}
    for lemma, more in b.forms.items():
        forms[lemma] = forms.get(lemma, set()) | more

    def sim(x, y):
        return _similarity(x, y, vectors, forms)

    lemmas_a, lemmas_b = Counter(w for w, _, _ in a.content), Counter(w for w, _, _ in b.content)
    left_a = list((lemmas_a - lemmas_b).elements())
    left_b = list((lemmas_b - lemmas_a).elements())
    found = WordMatch([(x, y) for x in set(left_a) for y in set(left_b) if _negating_prefix(x, y)], [], [], [], [])
    for x, y in found.prefixed:
        left_a.remove(x)
        left_b.remove(y)
    for x in list(left_a):  # derived forms
        y = next((y for y in left_b if _related_forms(x, y)), None)
        if y is not None and not _contrasting_compounds(x, y):
            found.related.append((x, y))
            left_a.remove(x)
            left_b.remove(y)
    for one, other, flip in ((left_a, left_b, False), (left_b, left_a, True)):  # "sandcastle" / "sand castle"
        for x in list(one):
            parts = next(((u, v) for u in other for v in other if u != v and x.replace("-", "") == u + v), None)
            if parts and all(p in other for p in parts):
                found.related.append((" ".join(parts), x) if flip else (x, " ".join(parts)))
                one.remove(x)
                other.remove(parts[0])
                other.remove(parts[1])
    modifiers = a.modifiers | b.modifiers
    for i, j, similarity in _pair_up(left_a, left_b, sim):
        x, y = left_a[i], left_b[j]
        if similarity >= synonym + (ADJECTIVE_MARGIN if x in modifiers or y in modifiers else 0.0):
            (found.contrasts if _contrasting_compounds(x, y) else found.synonyms).append((x, y, similarity))
    rest_a = list((Counter(left_a) - Counter(x for x, _, _ in found.synonyms + found.contrasts)).elements())
    rest_b = list((Counter(left_b) - Counter(y for _, y, _ in found.synonyms + found.contrasts)).elements())
    same = {(w, w) for w in lemmas_a & lemmas_b} | {(x, y) for x, y, _ in found.synonyms} | set(found.related)
    class_of = {w: c for w, c, _ in a.content + b.content}
    slots_a, slots_b = _slots(a), _slots(b)

    order_a, order_b = [w for w, _, _ in a.content], [w for w, _, _ in b.content]

    def neighbours(order, word):
        return {(order[k - 1] if k else "", order[k + 1] if k + 1 < len(order) else "")
                for k, w in enumerate(order) if w == word}

    def corresponds(u, v):
        return u == v or (u, v) in same

    def in_place(i, j):
        """The same relation to corresponding heads in the parses, or (where a parser reads the two differently)
        the same content words either side of it."""
        x, y = rest_a[i], rest_b[j]
        if class_of[x] == class_of[y] and any(ga == gb and corresponds(ha, hb) for ga, ha in slots_a.get(x, ())
                                              for gb, hb in slots_b.get(y, ())):
            return True
        edge_ok = class_of[x] == class_of[y]  # across classes, only between two words on both sides
        return any(corresponds(la, lb) and corresponds(ra, rb) and (edge_ok or (la and ra))
                   for la, ra in neighbours(order_a, x) for lb, rb in neighbours(order_b, y))

    pairs = _pair_up(rest_a, rest_b, sim, in_place)
    found.substituted = [(rest_a[i], rest_b[j], similarity) for i, j, similarity in pairs]
    found.added = [x for k, x in enumerate(rest_a) if k not in {i for i, _, _ in pairs}] + [
        y for k, y in enumerate(rest_b) if k not in {j for _, j, _ in pairs}]
    words_a, words_b = [w for w, _, _ in a.content], [w for w, _, _ in b.content]
    if words_a and words_b:
        loose = set(found.added) | {w for p in found.substituted for w in p[:2]}
        covered = [1.0 if w not in loose else max(0.0, max(sim(w, v) for v in other))
                   for side, other in ((words_a, words_b), (words_b, words_a)) for w in side]
        found.coverage = round(sum(covered) / len(covered), 4)
    elif words_a or words_b:
        found.coverage = 0.0
    return found


def _numbers_differ(a: Reading, b: Reading) -> str:
    """The reason the numerals differ, or ""."""
    if +a.numbers != +b.numbers:
        return f"numbers: {_numbers_text(a.numbers)} / {_numbers_text(b.numbers)}"
    wrong = a.counted ^ b.counted
    if wrong:
        return "numbers count other things: " + ", ".join(f"{v} {n}" for v, n in sorted(wrong))
    if a.quantities and b.quantities and a.quantities != b.quantities:
        return f"quantities: {', '.join(sorted(a.quantities))} / {', '.join(sorted(b.quantities))}"
    return ""


def compare(a: Reading, b: Reading, vectors, synonym: float) -> tuple[dict, list[str]]:
    """The checks' features (without the cosine) and their reasons in words. Four are contradictions
    (negation, numbers, role_swap, substituted: a different word in the same place, opposite directions,
    contrasting compounds); ``added`` is the share of both captions' content the other does not cover, which
    rewording raises a little and different content a lot."""
    words = match_words(a, b, vectors, synonym)
    reasons = [f"negation: '{x}' / '{y}'" for x, y in words.prefixed]
    negation = int(a.negations != b.negations or bool(words.prefixed))
    if a.negations != b.negations:
        reasons.append(f"negation: {a.negations} negation(s) against {b.negations}")
    same = {(w, w) for w, _, _ in a.content} | {(x, y) for x, y, _ in words.synonyms} | set(words.related)
    opposite = sorted((x, y) for x, ox in a.directed - b.directed for y, oy in b.directed - a.directed
                      if frozenset((x, y)) in OPPOSITE and (ox == oy or (ox, oy) in same))
    reasons += [f"opposite direction: '{x}' / '{y}'" for x, y in opposite]
    reasons += [f"contrasting compounds: '{x}' / '{y}'" for x, y, _ in words.contrasts]
    reasons += [f"different word in the same place: '{x}' / '{y}' (similarity {sim:.2f})"
                for x, y, sim in words.substituted]
    numbers = _numbers_differ(a, b)
    if numbers:
        reasons.append(numbers)
    swap = _role_swap(a, _renamed(b, {y: x for x, y, _ in words.synonyms} | {
        y: x for x, y in words.related if " " not in x + y}))
    if swap:
        reasons.append(swap)
    reasons.append(f"content covered: {words.coverage:.2f}")
    if words.added:
        reasons.append("reworded or only in one caption: " + ", ".join(f"'{w}'" for w in words.added))
    reasons += [f"synonyms: '{x}' / '{y}' ({sim:.2f})" for x, y, sim in words.synonyms]
    reasons += [f"related forms: '{x}' / '{y}'" for x, y in words.related]
    features = {"negation": negation, "numbers": int(bool(numbers)), "role_swap": int(bool(swap)),
                "substituted": len(words.substituted) + len(words.contrasts) + len(opposite),
                "added": round(1.0 - words.coverage, 4)}
    return features, reasons


def _numbers_text(numbers: Counter) -> str:
    return ", ".join(sorted(numbers.elements())) or "none"


# --- the score --------------------------------------------------------------------------------------

# Default weights of the logistic score, set by reasoning, not fitted: a pair at cosine 0.65 with nothing
# found and every content word covered is at the boundary; a contradiction (negation, numbers, swapped roles, a
# different word in the same place) outweighs any cosine (the encoder cannot see them); what rewording leaves
# uncovered costs in proportion: a quarter of the content uncovered costs what 0.15 of cosine does, so a heavy
# paraphrase at cosine 0.8 passes with up to a quarter of its content uncovered, one at 0.9 with up to two fifths.
DEFAULT_WEIGHTS = {"bias": -6.5, "cosine": 10.0, "negation": -8.0, "numbers": -8.0, "role_swap": -8.0,
                   "substituted": -8.0, "added": -6.0}
DEFAULT_THRESHOLD = 0.5


@dataclass
class PairScorer:
    weights: dict = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    threshold: float = DEFAULT_THRESHOLD

    def score(self, features: dict) -> float:
        z = self.weights.get("bias", 0.0) + sum(self.weights.get(k, 0.0) * float(features.get(k, 0))
                                                 for k in FEATURES)
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@dataclass
class PairJudgement:
    cosine: float
    features: dict
    score: float
    same: bool
    reasons: list[str]

    def as_details(self) -> dict:
        return {"cosine": round(self.cosine, 4), "score": round(self.score, 4), "same": self.same,
                "reasons": self.reasons[:8], "features": self.features}


def judge(a: Reading, b: Reading, cosine: float, vectors, scorer: PairScorer, synonym: float) -> PairJudgement:
    """One pair (the ``read`` of each parse): ``vectors`` maps every content lemma of both to a unit vector
    (``word_vectors``)."""
    features, reasons = compare(a, b, vectors, synonym)
    features = {"cosine": round(float(cosine), 4), **features}
    score = scorer.score(features)
    return PairJudgement(float(cosine), features, score, score >= scorer.threshold, reasons)


def lemmas_of(readings) -> list[str]:
    """Every content lemma the checks will compare, and the forms the captions use (for ``word_vectors``)."""
    return sorted({w for reading in readings for w, _, _ in reading.content}
                  | {f for reading in readings for more in reading.forms.values() for f in more})


def word_vectors(words: list[str], encode) -> dict[str, np.ndarray]:
    """Unit vectors of single words by the sentence encoder (``encode(texts) -> matrix``)."""
    import numpy as np

    if not words:
        return {}
    matrix = np.asarray(encode(words), dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    return dict(zip(words, matrix))


def judge_texts(pairs: list[tuple[str, str]], *, encode, parse, scorer: PairScorer | None = None,
                synonym: float = 0.8) -> list[PairJudgement]:
    """Judge caption pairs by their texts: ``encode(texts) -> unit vectors`` (the sentence encoder), ``parse(texts)
    -> {text: Doc}`` (spaCy with SPACY_NEEDS). The cosine is the encoder's, as in the step."""
    import numpy as np

    scorer = scorer or PairScorer()
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    if not texts:
        return []
    sentence = dict(zip(texts, np.asarray(encode(texts), dtype=np.float32)))
    readings = {t: read(doc) for t, doc in parse(texts).items() if doc is not None}
    vectors = word_vectors(lemmas_of(readings.values()), encode)
    out = []
    for a, b in pairs:
        cosine = float(sentence[a] @ sentence[b])
        if a not in readings or b not in readings:
            out.append(PairJudgement(cosine, {"cosine": round(cosine, 4)}, 0.0, False, ["not parsed"]))
            continue
        out.append(judge(readings[a], readings[b], cosine, vectors, scorer, synonym))
    return out


__all__ = ["DEFAULT_THRESHOLD", "DEFAULT_WEIGHTS", "FEATURES", "PairJudgement", "PairScorer", "Reading", "WordMatch",
           "match_words",
           "SPACY_NEEDS", "compare", "judge", "judge_texts", "lemmas_of", "read", "word_vectors"]
