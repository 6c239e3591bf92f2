"""Caption seeds from museum-style descriptions (seed 001, Section 2, "Caption seed extractor").

A seed is "subject relation object" (A_B_C) where A and C are class words (Open-Images-like objects:
person, horse, dragon, sword, ...) and B a visual relation (Visual-Genome-like: on, with, riding,
holding, ...); both vocabularies are parameters a curator edits. Per sentence (the parser's
sentences of the item's parse):

1. Tuning: person names become "person": NER PERSON spans (their proper-noun part: the small model
   sometimes drags a verb in), proper nouns in the ``names`` list, and proper nouns after a role
   title ("Emperor Charles V", "St Demetrius"), the title included. Third-person pronouns become
   "person" ("person's" for possessives: "his spear" -> "person's spear"). An adnominal -ing clause
   gets "is" ("are" after a plural): "A person riding a horse" -> "A person is riding a horse".
2. Segmentation: the tuned sentence from its first class word to its last (two at least):
   "Miracle of person with the dragon." -> "person with the dragon" (an article is put before a
   substituted "person" that opens a segment, so that the parser reads a noun phrase).
3. The segment is parsed again, and from each head: a verb whose form is in ``relations`` takes its
   subject (active or passive; a verb without one takes its governing verb's subject, an adnominal
   verb the noun it modifies) and its complements (direct object, attribute, dative, prepositional
   object, adjectival/clausal complement); a class noun takes its prepositional phrase. Seeds are
   emitted when subject and object are class words: "person slays dragon", "person on horse".
   Relation text: the verb as written ("slays", "riding"), with its preposition when the object
   comes through one after the verb ("sits on"); a prepositional phrase before the verb or under
   "be" gives the preposition alone ("person, on a horse, slays ..." -> "person on horse").

   A participle that is no relation of its own gives its preposition ("person, mounted on a horse,
   slays ..." -> "person on horse"), and a main verb whose subject the parser left inside such a
   participle ("The knight, mounted on ..., pierces") takes that subject (seed_checks.py).
4. Each seed is confirmed against the original sentence's parse (``check_pos``): its verb is a verb
   there and its subject there is the seed's subject, its class words are nouns there; refused seeds
   are listed in ``details["refused"]``. A description whose language is not English is translated
   first by the local model ``translation_model`` names, or read as written with
   ``details["translation"] = "not run: no model configured"``.

The filter keeps an item with at least one seed (score = number of seeds, details {"seeds":
[[subject, relation, object, sentence], ...], "segments": [...]}) and drops it with ``no_seed``
otherwise (``unparsed`` without a parse). ``save_seeds(run, caption_id, seeds)`` writes the
CaptionSeed rows; ``seed_captions.save_chunk_seeds(run, {caption id: seeds})``, which the executor calls once per
chunk with each kept description's details["seeds"], writes those rows and, per seed, a child caption
of the description (origin "seed", the seed as a short caption: ``seed_text`` -> "person slays
dragon"), so that a release can ship the seeds (origin "seed") instead of or beside the descriptions.
Both are idempotent: a chunk run again, a reconcile or another run of the same descriptions finds the
rows and captions already there (a seed caption is unique per description and text, whatever the run).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import seed_checks
from .base import Decision, Filter, Item, drop, keep
from .registry import register
from .seed_words import CLASSES, NAMES, PREPOSITIONS, PRONOUNS, RELATIONS, TITLES, noun_forms, verb_forms

_SUBJECT = ("nsubj", "nsubjpass")
_OBJECT = ("dobj", "attr", "dative", "oprd", "obj")
_COMPLEMENT = ("acomp", "xcomp", "ccomp")
_NOUNISH = ("NOUN", "PROPN")
_ARGUMENT = ("dobj", "pobj", "nsubj", "nsubjpass", "attr")


@dataclass
class _Piece:
    text: str
    space: str
    cls: str | None  # the class word it names, if any
    substitute: bool = False  # "person" standing for a name or a pronoun
    token: object = None  # the sentence's token it writes, if one


@register
class CaptionSeeds(Filter):
    name = "caption_seeds"
    # 2: participial phrases give seeds ("mounted on a horse"); seeds confirmed against the sentence's own
    #    parse (check_pos); non-English descriptions translated through translation_model when configured
    version = 2
    label = "Caption seeds (museum descriptions)"
    description = ("Subject-relation-object seeds between class words, from the dependency parse of each "
                   "sentence after names and pronouns become 'person' (seed 001).")
    text_only = True  # the decision depends on the text alone
    per_item = True
    needs = frozenset({"pos", "deps", "ents", "lemma"})
    defaults = {
        "classes": list(CLASSES),
        "relations": list(RELATIONS),
        "names": list(NAMES),  # proper nouns replaced by "person" even where NER misses them
        "titles": list(TITLES),  # role words that make the proper nouns after them a person
        "pronouns": list(PRONOUNS),
        "person_word": "person",
        "max_sentences": 50,  # per item: a guard against pasted essays
        # A local translation model directory for descriptions whose language is not English (empty: none;
        # such a description is read as written and its decision says "translation: not run: no model
        # configured"). Nothing is downloaded. See seed_checks.py.
        "translation_model": "",
        "check_pos": True,  # confirm each seed against the original sentence's parse (seed_checks.confirmed)
    }

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        for key in ("classes", "relations", "names", "titles", "pronouns"):
            value = self.params[key]
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"caption_seeds: {key} must be a list of words")
        self.person = self.params["person_word"].strip().lower()
        self.classes = {w.strip().lower() for w in self.params["classes"]} | {self.person}
        self.relations = {w.strip().lower() for w in self.params["relations"]}
        self.names = {part for w in self.params["names"] for part in w.lower().split()}
        self.titles = {w.strip().lower() for w in self.params["titles"]}
        self.pronouns = {w.strip().lower() for w in self.params["pronouns"]}
        self.prepositions = {w for w in self.relations if w in PREPOSITIONS}
        seed_checks.check_model(self.params["translation_model"])
        self.translator = seed_checks.Translator(self.params["translation_model"])

    # --- the filter ---

    def apply(self, items: list[Item]) -> list[Decision]:
        docs, notes = self._english_docs(items)
        segments_of: dict[int, list[tuple[str, str, object]]] = {}  # item index -> [(segment, sentence, span)]
        for i, item in enumerate(items):
            if docs[i] is not None:
                segments_of[i] = self.segments(docs[i], spans=True)
        distinct = list(dict.fromkeys(seg for found in segments_of.values() for seg, _, _ in found))
        parsed = self._parse(distinct)
        out = []
        for i, item in enumerate(items):
            if i not in segments_of:
                out.append(drop("unparsed", **notes.get(i, {})))
                continue
            seeds, seen, refused = [], set(), []
            for segment, sentence, span in segments_of[i]:
                facts = seed_checks.SentenceFacts(self, span) if self.params["check_pos"] else None
                for seed in self.extract(parsed[segment]):
                    if facts is not None and not seed_checks.confirmed(self, seed, facts):
                        refused.append("_".join(seed))
                    elif (seed, sentence) not in seen:
                        seen.add((seed, sentence))
                        seeds.append([*seed, sentence])
            segments = list(dict.fromkeys(s for s, _, _ in segments_of[i]))
            extra = {**notes.get(i, {}), **({"refused": refused} if refused else {})}
            if seeds:
                out.append(keep("", float(len(seeds)), seeds=seeds, segments=segments, **extra))
            else:
                out.append(drop("no_seed", segments=segments, **extra))
        return out

    def _english_docs(self, items: list[Item]) -> tuple[list, dict[int, dict]]:
        """Each item's parse to read, translated first when its language is not English and a model is
        configured; and what the decision notes about translation."""
        docs = [item.doc for item in items]
        notes: dict[int, dict] = {}
        foreign = [i for i, item in enumerate(items) if self.translator.needed(item)]
        if not foreign:
            return docs, notes
        if not self.translator.model:
            for i in foreign:
                notes[i] = {"translation": seed_checks.NOT_CONFIGURED}
            return docs, notes
        from . import nlp

        translated = self.translator.translate(list(dict.fromkeys(items[i].text for i in foreign)))
        parsed = nlp.parse_unique(list(dict.fromkeys(translated.values())), self.needs)
        for i in foreign:
            english = translated[items[i].text]
            docs[i] = parsed.get(english)
            notes[i] = {"translation": english, "translated_from": items[i].language}
        return docs, notes

    def _parse(self, texts: list[str]) -> dict:
        from . import nlp

        if not texts:
            return {}
        pipeline = nlp.load(frozenset({"pos", "deps", "lemma"}))
        return dict(zip(texts, pipeline.pipe(texts, batch_size=64)))

    # --- step 1 and 2: tuning and segmentation ---

    def segments(self, doc, spans: bool = False) -> list[tuple]:
        """[(segment, original sentence)] for each sentence with two class words or more. A segment
        that opens with a substituted "person" reads "The person ...": a bare "person" where a name
        stood is not English, and the small model then tags the verb as a plural noun ("person
        kneels")."""
        found = []
        for n, sent in enumerate(doc.sents):
            if n >= self.params["max_sentences"]:
                break
            pieces = self.tune(sent)
            at = [k for k, p in enumerate(pieces) if p.cls]
            if len(at) >= 2:
                first, last = at[0], at[-1]
                # The class word's own article and adjectives come with it ("A young woman plays ..."): a
                # bare noun opening a segment is read as a compound ("woman plays" as one noun).
                edge = pieces[first].token.left_edge.i if pieces[first].token is not None else None
                while edge is not None and first > 0 and pieces[first - 1].token is not None \
                        and pieces[first - 1].token.i >= edge and not pieces[first - 1].substitute:
                    first -= 1
                text = "".join(p.text + p.space for p in pieces[first:last]) + pieces[last].text
                if pieces[first].substitute:
                    text = "The " + text
                found.append((text, sent.text.strip(), sent) if spans else (text, sent.text.strip()))
        return found

    def tune(self, sent) -> list[_Piece]:
        """The sentence as pieces, with names and pronouns replaced and adnominal -ing clauses made
        present continuous."""
        replaced = self._person_spans(sent)
        pieces: list[_Piece] = []
        i = sent.start
        while i < sent.end:
            if i in replaced:
                end = replaced[i]
                pieces.append(_Piece(self.person, sent.doc[end - 1].whitespace_, self.person, substitute=True))
                i = end
                continue
            token = sent.doc[i]
            lower = token.lower_
            if lower in self.pronouns and token.pos_ == "PRON":
                if token.tag_ == "PRP$" or lower in ("hers", "theirs"):  # "his spear": the spear is the entity
                    pieces.append(_Piece(self.person + "'s", token.whitespace_, None, substitute=True))
                else:
                    pieces.append(_Piece(self.person, token.whitespace_, self.person, substitute=True))
            else:
                head = token.head
                # not inside a subject, where "is" would make two verbs: "A shepherd leaning on ... watches"
                if token.dep_ == "acl" and token.tag_ == "VBG" and head.i < i and self._nounish(head, replaced) \
                        and head.dep_ not in ("nsubj", "nsubjpass"):
                    plural = head.tag_ in ("NNS", "NNPS")
                    pieces.append(_Piece("are" if plural else "is", " ", None))
                pieces.append(_Piece(token.text, token.whitespace_, self.class_of(token), token=token))
            i += 1
        return pieces

    def _nounish(self, token, replaced) -> bool:
        return token.pos_ in _NOUNISH or token.pos_ == "PRON" or any(s <= token.i < e for s, e in replaced.items())

    def _person_spans(self, sent) -> dict[int, int]:
        """{start: end} token ranges (doc indices) that name a person."""
        doc = sent.doc
        # Proper nouns, and listed names the tagger took for common nouns ("Theodore", "Eustace").
        propn = {t.i for t in sent if t.pos_ == "PROPN" or (t.is_title and t.lower_ in self.names)}
        spans = []

        def run_around(i):
            start, end = i, i + 1
            while start - 1 in propn:
                start -= 1
            while end in propn:
                end += 1
            return start, end

        for ent in sent.ents:
            if ent.label_ == "PERSON":
                heads = [t.i for t in ent if t.i in propn]
                if heads:
                    spans.append(run_around(heads[0]))
        for t in sent:
            if t.i in propn and t.lower_ in self.names:
                spans.append(run_around(t.i))
            elif t.lower_ in self.titles and t.i + 1 in propn and doc[t.i + 1].lower_ not in self.titles:
                spans.append(run_around(t.i + 1))
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            while start > sent.start and doc[start - 1].lower_ in self.titles:
                start -= 1
            words = [doc[k].lower_ for k in range(start, end)]
            if all(w in self.titles for w in words) or " ".join(words) in self.classes:
                continue  # a bare title ("the King") or a name the curators made a class
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return {start: end for start, end in merged}

    def class_of(self, token) -> str | None:
        # A noun in a noun's place that the tagger called an adjective ("plays the lute" with "lute" JJ)
        if token.pos_ not in _NOUNISH and not (token.pos_ == "ADJ" and token.dep_ in _ARGUMENT):
            return None
        for form in noun_forms(token.text, token.lemma_):
            if form in self.classes:
                return form
        return None

    # --- step 3: seeds from the segment's parse ---

    def extract(self, seg) -> list[tuple[str, str, str]]:
        seeds: list[tuple[str, str, str]] = []
        for token in seg:
            if token.pos_ in ("VERB", "AUX"):
                seeds.extend(self._verb_seeds(token))
            elif (subject := self._cls(token)) is not None:
                for prep in token.children:
                    if prep.dep_ == "prep" and prep.lower_ in self.relations:
                        for obj in self._objects_of(prep):
                            seeds.append((subject, prep.lower_, obj))
        return list(dict.fromkeys(seeds))

    def _cls(self, token) -> str | None:
        if token.lower_ == self.person or (token.pos_ == "PRON" and token.lower_ in self.pronouns):
            return self.person
        return self.class_of(token)

    def _objects_of(self, prep) -> list[str]:
        found = []
        for obj in prep.children:
            if obj.dep_ == "pobj":
                for o in (obj, *obj.conjuncts):
                    if (c := self._cls(o)) is not None:
                        found.append(c)
        return found

    def _subjects(self, verb, depth: int = 0) -> list[str]:
        direct = [t for t in verb.children if t.dep_ in _SUBJECT]
        if direct:
            return [c for t in direct for c in (self._cls(t), *map(self._cls, t.conjuncts)) if c]
        if verb.dep_ in ("acl", "relcl") and (c := self._cls(verb.head)):
            return [c]
        if verb.dep_ in ("conj", "advcl", "xcomp") and verb.head is not verb and depth < 4:
            return self._subjects(verb.head, depth + 1)
        # "The knight, mounted on a horse, pierces ...", the participle parsed as a clause holding the subject
        for clause in verb.children:
            if clause.dep_ in ("ccomp", "advcl") and clause.i < verb.i and seed_checks.participle_like(clause):
                found = [c for t in clause.children if t.dep_ in _SUBJECT for c in (self._cls(t),) if c]
                if found:
                    return found
        return []

    def _verb_seeds(self, verb) -> list[tuple[str, str, str]]:
        copula = verb.lemma_ == "be"
        if not copula and not (verb_forms(verb.text, verb.lemma_) & self.relations):
            if seed_checks.participle_like(verb) and (subjects := self._subjects(verb)):
                # "person, mounted on a horse, ...": the participle's preposition is the relation
                return [(s, r, o) for s in subjects for r, o in seed_checks.participle_pairs(self, verb)]
            return []
        subjects = self._subjects(verb)
        if not subjects:
            return []
        word = verb.lower_ + "".join(" " + t.lower_ for t in verb.children if t.dep_ == "prt")
        pairs: list[tuple[str, str]] = []  # (relation, object class)
        for child in verb.children:
            if child.dep_ in _OBJECT and not copula:
                pairs += [(word, c) for c in map(self._cls, (child, *child.conjuncts)) if c]
            elif child.dep_ in ("prep", "agent"):
                if copula or child.i < verb.i:  # "is on a horse", "..., on a horse, slays": the preposition is the relation
                    if child.lower_ in self.relations:
                        pairs += [(child.lower_, c) for c in self._objects_of(child)]
                else:
                    pairs += [(f"{word} {child.lower_}", c) for c in self._objects_of(child)]
            elif child.dep_ in _COMPLEMENT and not copula and not (child.i < verb.i and seed_checks.participle_like(child)):
                if (c := self._cls(child)) is not None:
                    pairs.append((word, c))
                elif child.pos_ == "VERB":
                    inner = f"{word} {child.lower_}"
                    for grand in child.children:
                        if grand.dep_ in _OBJECT:
                            pairs += [(inner, c) for c in map(self._cls, (grand, *grand.conjuncts)) if c]
                        elif grand.dep_ == "prep":
                            pairs += [(f"{inner} {grand.lower_}", c) for c in self._objects_of(grand)]
        return [(s, r, o) for s in subjects for r, o in pairs]


# --- Storage: what the executor calls ---------------------------------------------------------------

def save_seeds(run, caption_id: int, seeds: list) -> int:
    """Write a caption's seeds (details["seeds"]: [subject, relation, object, sentence] lists; the
    sentence may be left out) as CaptionSeed rows of ``run`` (a FilterRun, its id, or None).
    Rows already there are left alone (unique per caption, run and seed). Returns how many were given."""
    from ..models import CaptionSeed

    run_id = getattr(run, "pk", run)
    rows, seen = [], set()
    for seed in seeds or []:
        subject, relation, obj = (str(part)[:200] for part in seed[:3])
        sentence = str(seed[3]) if len(seed) > 3 else ""
        if (subject, relation, obj) in seen:
            continue
        seen.add((subject, relation, obj))
        rows.append(CaptionSeed(caption_id=caption_id, run_id=run_id, subject=subject, relation=relation,
                                object=obj, sentence=sentence))
    CaptionSeed.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)

