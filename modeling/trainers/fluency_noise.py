"""Realistic machine-translation errors made from fluent text: the synthetic negatives of the
"fluency-detector" trainer.

Every corruption works on a spaCy parse (part-of-speech tags, morphology, dependencies) and changes
one construction the way a translation system or a learner translating word by word does, across the
error classes that grammatical error correction corpora annotate (Bryant et al. 2017, ERRANT: the
determiner, preposition, verb-form, subject-verb agreement, noun-number, word-order, missing and
unnecessary-word classes): articles, prepositions, agreement and number, tense and verb form, word
order (the adjective after its noun, the verb at the end or in second place, a time or place phrase
moved), a dropped content or function word, a missing verb, a repeated word, a pronoun swapped, and
patterns of literal translation (the possessive rewritten as "the X of the Y", analytic comparatives,
an article before a generic plural). Generating negatives this way from unlabelled text and
pre-training on them is the recipe of Grundkiewicz, Junczys-Dowmunt and Heafield 2019 ("Neural
Grammatical Error Correction Systems with Unsupervised Pre-training on Synthetic Data"), with
per-class rules in place of their confusion sets; the detector that learns to tell them from the
original is the discriminator of ELECTRA (Clark et al. 2020), at sentence and token level.

``corrupt(doc, rng)`` returns ``(words, changed)``: the corrupted sentence as words (each with its
trailing space) and the indices of the words that were changed or that follow a deletion (the tokens a
token-level detector should flag), or None where no rule of the drawn class applies.
"""
from __future__ import annotations

import random

ARTICLES = ("a", "an", "the")
PREPOSITIONS = ("in", "on", "at", "of", "for", "to", "with", "from", "by", "into", "onto", "over", "under",
                "about", "during", "through", "near", "behind", "across", "along", "inside", "towards")
BE = {"is": "are", "are": "is", "was": "were", "were": "was", "has": "have", "have": "has", "does": "do",
      "do": "does", "am": "is"}
PRONOUNS = {"he": ("she", "it", "they"), "she": ("he", "it", "they"), "it": ("he", "she", "they"),
            "they": ("he", "she", "it"), "his": ("her", "its", "their"), "her": ("his", "its", "their"),
            "its": ("his", "her", "their"), "their": ("his", "her", "its"), "him": ("her", "them", "it"),
            "them": ("him", "her", "it"), "we": ("they", "us"), "us": ("we", "them"), "who": ("which", "what"),
            "which": ("who", "what")}
TIME_WORDS = {"yesterday", "today", "tomorrow", "now", "tonight", "morning", "evening", "afternoon", "night",
              "week", "year", "month", "day", "season", "summer", "winter", "spring", "autumn", "monday",
              "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february", "march",
              "april", "may", "june", "july", "august", "september", "october", "november", "december",
              "century", "weekend", "during", "after", "before", "since", "when"}
VOWEL_SOUND = set("aeiou")

CLASSES = ("article", "preposition", "agreement", "number", "verb_form", "adjective_order", "verb_final",
           "verb_second", "move_phrase", "drop_content", "drop_function", "missing_verb", "repeat",
           "pronoun", "literal")


class _Edit:
    """A sentence as a list of [text, trailing space] with the changed positions tracked."""

    def __init__(self, doc):
        self.words = [[t.text, t.whitespace_ or ""] for t in doc if not t.is_space]
        self.index = {t.i: n for n, t in enumerate(w for w in doc if not w.is_space)}
        self.changed: set[int] = set()

    def pos(self, token) -> int:
        return self.index[token.i]

    def replace(self, token, text: str) -> None:
        n = self.pos(token)
        self.words[n][0] = _match_case(self.words[n][0], text)
        self.changed.add(n)


def _match_case(old: str, new: str) -> str:
    return new[:1].upper() + new[1:] if old[:1].isupper() and new else new


def _result(words, changed):
    words = [w for w in words if w[0]]
    if not words:
        return None
    words[0][0] = words[0][0][:1].upper() + words[0][0][1:]
    return [w[0] + w[1] for w in words], sorted(changed)


def _finish(edit: _Edit):
    return _result([list(w) for w in edit.words], edit.changed)


def _rebuild(doc, order, changed_tokens=(), drop=()):
    """Words in ``order`` (token indices; spacing normalised), flagging the moved/changed tokens and the
    word after each dropped one."""
    tokens = {t.i: t for t in doc}
    drop = set(drop)
    out, changed = [], set()
    flag_next = False
    for i in order:
        if i in drop:
            flag_next = True
            continue
        tok = tokens[i]
        if tok.is_space:
            continue
        text = tok.text
        out.append([text, " "])
        if i in changed_tokens or flag_next:
            changed.add(len(out) - 1)
        flag_next = False
    if flag_next and out:
        changed.add(len(out) - 1)
    # spaCy's spacing for punctuation and contractions: no space before them
    for n in range(1, len(out)):
        if out[n][0] in {".", ",", ";", ":", "!", "?", ")", "'s", "’s", "n't", "%"}:
            out[n - 1][1] = ""
    if out:
        out[-1][1] = ""
    if doc and out and not doc[0].text[:1].isupper():
        pass
    elif out and len(order) and order[0] != 0 and doc[0].pos_ != "PROPN" and doc[0].text not in ("I",):
        # the former first word is no longer first: lower-case it
        first = next((n for n, i in enumerate(x for x in order if x not in drop) if i == 0), None)
        if first is not None and first < len(out):
            out[first][0] = out[first][0][:1].lower() + out[first][0][1:]
    return _result(out, changed)


def _subtree_span(token):
    left, right = token.left_edge.i, token.right_edge.i
    return list(range(left, right + 1))


# --- the classes ---------------------------------------------------------------------------------------

def article(doc, rng):
    edit = _Edit(doc)
    dets = [t for t in doc if t.lower_ in ARTICLES]
    nouns = [t for t in doc if t.pos_ == "NOUN" and not any(c.dep_ in ("det", "poss") for c in t.children)
             and t.dep_ != "compound"]
    choice = rng.random()
    if dets and (choice < 0.45 or not nouns):
        tok = rng.choice(dets)
        if rng.random() < 0.6:
            return _finish_drop(edit, edit.pos(tok))
        if tok.lower_ == "the":
            nxt = tok.nbor(1) if tok.i + 1 < len(doc) else None
            new = "a" if nxt is not None and nxt.lower_[:1] not in VOWEL_SOUND else "an"
            if rng.random() < 0.3:
                new = "an" if new == "a" else "a"  # the wrong indefinite form
        else:
            new = "the" if rng.random() < 0.7 else ("an" if tok.lower_ == "a" else "a")
        edit.replace(tok, new)
        return _finish(edit)
    if nouns:
        tok = rng.choice(nouns)
        start = tok.left_edge if tok.left_edge.i < tok.i and tok.left_edge.pos_ in ("ADJ", "NUM", "ADV") else tok
        if start.pos_ == "NUM":
            start = tok
        n = edit.pos(start)
        article_ = "the" if rng.random() < 0.6 else ("an" if start.lower_[:1] in VOWEL_SOUND else "a")
        if tok.tag_ == "NNS" and article_ != "the":
            article_ = "a"
        edit.words.insert(n, [_match_case(edit.words[n][0], article_), " "])
        if n == 0:
            edit.words[1][0] = edit.words[1][0] if doc[start.i].pos_ == "PROPN" else edit.words[1][0][:1].lower() + \
                edit.words[1][0][1:]
        edit.changed = {c + (1 if c >= n else 0) for c in edit.changed} | {n}
        return _finish(edit)
    return None


def _finish_drop(edit: _Edit, n: int):
    words = [list(w) for k, w in enumerate(edit.words) if k != n]
    changed = {c - (1 if c > n else 0) for c in edit.changed if c != n}
    if n < len(words):
        changed.add(n)
    if n == 0 and words:
        words[0][0] = words[0][0][:1].upper() + words[0][0][1:]
    return _result(words, changed)


def preposition(doc, rng):
    preps = [t for t in doc if t.pos_ == "ADP" and t.lower_ in PREPOSITIONS]
    if not preps:
        return None
    tok = rng.choice(preps)
    edit = _Edit(doc)
    if rng.random() < 0.2:
        return _finish_drop(edit, edit.pos(tok))
    common = [p for p in PREPOSITIONS[:12] if p != tok.lower_]
    edit.replace(tok, rng.choice(common))
    return _finish(edit)


def agreement(doc, rng):
    edit = _Edit(doc)
    aux = [t for t in doc if t.lower_ in BE and t.pos_ in ("AUX", "VERB")]
    verbs = [t for t in doc if t.tag_ in ("VBZ", "VBP") and t.pos_ == "VERB" and t.lower_ not in BE]
    if aux and (rng.random() < 0.6 or not verbs):
        tok = rng.choice(aux)
        edit.replace(tok, BE[tok.lower_])
        return _finish(edit)
    if verbs:
        tok = rng.choice(verbs)
        if tok.tag_ == "VBZ":
            edit.replace(tok, tok.lemma_)
        else:
            edit.replace(tok, _third_person(tok.lower_))
        return _finish(edit)
    return None


def _third_person(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in VOWEL_SOUND:
        return verb[:-1] + "ies"
    return verb + "s"


def _plural(noun: str) -> str:
    if noun.endswith(("s", "sh", "ch", "x", "z")):
        return noun + "es"
    if noun.endswith("y") and len(noun) > 2 and noun[-2] not in VOWEL_SOUND:
        return noun[:-1] + "ies"
    return noun + "s"


def number(doc, rng):
    nouns = [t for t in doc if t.tag_ in ("NN", "NNS") and t.is_alpha and len(t) > 2]
    if not nouns:
        return None
    tok = rng.choice(nouns)
    edit = _Edit(doc)
    if tok.tag_ == "NNS":
        edit.replace(tok, tok.lemma_ if tok.lemma_ != tok.lower_ else tok.lower_.rstrip("s"))
    else:
        edit.replace(tok, _plural(tok.lower_))
    return _finish(edit)


def verb_form(doc, rng):
    verbs = [t for t in doc if t.pos_ == "VERB" and t.tag_ in ("VBD", "VBG", "VBN", "VBZ", "VBP", "VB")
             and t.is_alpha]
    if not verbs:
        return None
    tok = rng.choice(verbs)
    lemma = tok.lemma_.lower()
    options = {"VBD": [lemma, lemma + "ing"], "VBG": [lemma, _past(lemma)], "VBN": [lemma, lemma + "ing"],
               "VBZ": [_past(lemma), lemma + "ing"], "VBP": [lemma + "ing", _past(lemma)],
               "VB": [_third_person(lemma), lemma + "ing", _past(lemma)]}[tok.tag_]
    options = [o for o in options if o != tok.lower_]
    if not options:
        return None
    edit = _Edit(doc)
    edit.replace(tok, rng.choice(options))
    return _finish(edit)


def _past(verb: str) -> str:
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in VOWEL_SOUND:
        return verb[:-1] + "ied"
    return verb + "ed"


def adjective_order(doc, rng):
    pairs = [t for t in doc if t.dep_ == "amod" and t.pos_ == "ADJ" and t.head.i == t.i + 1]
    pairs += [t for t in doc if t.dep_ == "compound" and t.head.i == t.i + 1 and t.pos_ == "NOUN"]
    if not pairs:
        return None
    adj = rng.choice(pairs)
    order = list(range(len(doc)))
    order[adj.i], order[adj.i + 1] = adj.i + 1, adj.i
    return _rebuild(doc, order, changed_tokens={adj.i, adj.i + 1})


def verb_final(doc, rng):
    """The main verb (with its particle) moved to the end of its clause, as in a subordinate German or
    a Japanese/Turkish/Korean source clause translated word by word."""
    roots = [t for t in doc if t.dep_ == "ROOT" and t.pos_ == "VERB" and list(t.rights)]
    if not roots:
        return None
    verb = roots[0]
    moved = [verb.i] + [c.i for c in verb.children if c.dep_ == "prt"]
    end = max(t.i for t in doc if not t.is_punct) if any(not t.is_punct for t in doc) else len(doc) - 1
    if end <= verb.i:
        return None
    order = [i for i in range(len(doc)) if i not in moved and i <= end] + moved + \
        [i for i in range(end + 1, len(doc)) if i not in moved]
    return _rebuild(doc, order, changed_tokens=set(moved))


def verb_second(doc, rng):
    """A phrase fronted and the subject inverted after the verb ("In the park plays a child"), or the
    subject moved after its verb."""
    roots = [t for t in doc if t.dep_ == "ROOT" and t.pos_ in ("VERB", "AUX")]
    if not roots:
        return None
    verb = roots[0]
    subj = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass") and c.i < verb.i]
    if not subj:
        return None
    span = _subtree_span(subj[0])
    auxes = [c.i for c in verb.children if c.dep_ in ("aux", "auxpass") and c.i < verb.i]
    moved_verb = auxes + [verb.i]
    rest = [i for i in range(len(doc)) if i not in span and i not in moved_verb]
    head = [i for i in rest if i < span[0]]
    tail = [i for i in rest if i > verb.i]
    order = head + moved_verb + span + tail
    if order == list(range(len(doc))):
        return None
    return _rebuild(doc, order, changed_tokens=set(moved_verb) | {span[0]})


def move_phrase(doc, rng):
    """A time or place phrase (an adverb, or a prepositional phrase of time) moved between the verb and
    its object, or to the front: the adverbial order of many source languages."""
    candidates = []
    for t in doc:
        if t.dep_ in ("npadvmod", "advmod") and t.head.pos_ == "VERB" and t.lower_ in TIME_WORDS | {"often", "always",
                                                                                                 "never", "already",
                                                                                                 "still", "also"}:
            candidates.append(_subtree_span(t))
        elif t.dep_ == "prep" and t.head.pos_ == "VERB" and any(w.lower_ in TIME_WORDS for w in t.subtree):
            candidates.append(_subtree_span(t))
        elif t.dep_ == "prep" and t.head.pos_ == "VERB" and t.lower_ in ("in", "at", "on") and rng.random() < 0.5:
            candidates.append(_subtree_span(t))
    if not candidates:
        return None
    span = rng.choice(candidates)
    head = doc[span[0]].head
    rest = [i for i in range(len(doc)) if i not in span]
    objects = [c for c in head.children if c.dep_ in ("dobj", "attr", "dative") and c.i > head.i]
    if objects and objects[0].left_edge.i not in span:
        at = rest.index(objects[0].left_edge.i)
    elif span[0] > head.i:
        at = 0
    else:
        punct_end = [n for n, i in enumerate(rest) if doc[i].is_punct and n == len(rest) - 1]
        at = punct_end[0] if punct_end else len(rest)
    order = rest[:at] + span + rest[at:]
    if order == list(range(len(doc))):
        return None
    return _rebuild(doc, order, changed_tokens={span[0]})


def drop_content(doc, rng):
    words = [t for t in doc if t.pos_ in ("NOUN", "ADJ", "VERB", "ADV", "PROPN") and t.dep_ != "ROOT"]
    if not words:
        return None
    tok = rng.choice(words)
    return _rebuild(doc, list(range(len(doc))), drop={tok.i})


def drop_function(doc, rng):
    words = [t for t in doc if t.pos_ in ("DET", "ADP", "AUX", "PART", "PRON", "CCONJ", "SCONJ")]
    if not words:
        return None
    tok = rng.choice(words)
    return _rebuild(doc, list(range(len(doc))), drop={tok.i})


def missing_verb(doc, rng):
    """The finite verb or auxiliary dropped ("A man in a red coat across the street.")."""
    auxes = [t for t in doc if t.pos_ == "AUX" and t.dep_ in ("aux", "auxpass", "ROOT", "cop")]
    roots = [t for t in doc if t.dep_ == "ROOT" and t.pos_ == "VERB"]
    pick = auxes + roots
    if not pick:
        return None
    tok = rng.choice(pick)
    drop = {tok.i} | {c.i for c in tok.children if c.dep_ in ("aux", "prt") and tok.pos_ == "VERB"}
    return _rebuild(doc, list(range(len(doc))), drop=drop)


def repeat(doc, rng):
    words = [t for t in doc if t.is_alpha]
    if not words:
        return None
    tok = rng.choice(words)
    order = list(range(len(doc)))
    order.insert(tok.i + 1, tok.i)
    result = _rebuild(doc, order)
    if result is None:
        return None
    changed = [n for n in range(1, len(result[0])) if result[0][n].strip().lower() == result[0][n - 1].strip().lower()]
    return result[0], changed[:1]


def pronoun(doc, rng):
    prons = [t for t in doc if t.lower_ in PRONOUNS]
    if not prons:
        return None
    tok = rng.choice(prons)
    edit = _Edit(doc)
    edit.replace(tok, rng.choice(PRONOUNS[tok.lower_]))
    return _finish(edit)


def literal(doc, rng):
    """Constructions copied from the source language: the possessive as "the Y of the X", an analytic
    comparative or superlative ("more big", "the most tall"), an article before a generic plural or a
    mass noun's plural."""
    options = []
    for t in doc:
        if t.tag_ == "POS" and t.head.dep_ == "poss":
            options.append(("possessive", t))
        elif t.tag_ in ("JJR", "JJS") and t.lower_.endswith(("er", "est")) and len(t) > 4:
            options.append(("comparative", t))
        elif t.tag_ == "NNS" and not any(c.dep_ in ("det", "nummod", "poss") for c in t.children) \
                and t.dep_ in ("nsubj", "dobj", "pobj"):
            options.append(("generic", t))
    if not options:
        return None
    kind, tok = rng.choice(options)
    if kind == "possessive":
        owner = tok.head  # the possessor noun ("man" in "the man's dog")
        owned = owner.head
        owner_span = [i for i in _subtree_span(owner) if i != tok.i]
        if owned.i < owner.i or owned.i >= len(doc):
            return None
        before = [i for i in range(len(doc)) if i < owner_span[0]]
        between = [i for i in range(tok.i + 1, owned.i + 1)]
        after = [i for i in range(owned.i + 1, len(doc))]
        edit_words = []
        for i in before:
            edit_words.append([doc[i].text, doc[i].whitespace_ or " "])
        changed = {len(edit_words)}
        edit_words.append(["the", " "])
        for i in between:
            edit_words.append([doc[i].text, " "])
        changed.add(len(edit_words))
        edit_words.append(["of", " "])
        for i in owner_span:
            text = doc[i].text if doc[i].pos_ == "PROPN" or i != 0 else doc[i].text.lower()
            edit_words.append([text, " "])
        for i in after:
            if doc[i].is_punct and edit_words:
                edit_words[-1][1] = ""
            edit_words.append([doc[i].text, doc[i].whitespace_ or ""])
        if edit_words:
            edit_words[-1][1] = ""
        return _result(edit_words, changed)
    edit = _Edit(doc)
    if kind == "comparative":
        lemma = tok.lemma_.lower() if tok.lemma_.lower() != tok.lower_ else tok.lower_[:-2]
        edit.replace(tok, ("more " if tok.tag_ == "JJR" else "most ") + lemma)
        return _finish(edit)
    n = edit.pos(tok)
    start = edit.pos(tok.left_edge) if tok.left_edge.pos_ in ("ADJ",) else n
    edit.words.insert(start, ["the", " "])
    edit.changed = {start}
    return _finish(edit)


RULES = {"article": article, "preposition": preposition, "agreement": agreement, "number": number,
         "verb_form": verb_form, "adjective_order": adjective_order, "verb_final": verb_final,
         "verb_second": verb_second, "move_phrase": move_phrase, "drop_content": drop_content,
         "drop_function": drop_function, "missing_verb": missing_verb, "repeat": repeat, "pronoun": pronoun,
         "literal": literal}


def corrupt(doc, rng: random.Random, classes=CLASSES, tries: int = 6):
    """(words, changed word indices, class) of one corruption of ``doc``, or None when none applies.

    The class is drawn uniformly from those given; one that does not apply (no article to drop) or that
    leaves the sentence unchanged is redrawn, up to ``tries`` times."""
    original = "".join(t.text_with_ws for t in doc).strip()
    for _ in range(tries):
        name = rng.choice(list(classes))
        try:
            result = RULES[name](doc, rng)
        except (IndexError, ValueError, KeyError):  # an odd parse: draw another class
            result = None
        if result is None:
            continue
        words, changed = result
        if "".join(words).strip() == original or not words:
            continue
        return words, changed, name
    return None


__all__ = ["CLASSES", "RULES", "corrupt"]
