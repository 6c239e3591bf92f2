"""Hypernymization (seed 002, Section 3, "Text Transformation with Hypernymization") and the
rare-entity-type filter that follows it.

On the spaCy parse of a caption, in the paper's order:

1. noun modifiers that are proper nouns, numbers or units are removed ("Two sculptures",
   "Pakistani worker", "Norwich Union offices", "a 5 km race");
2. dates, durations and preposition-based locations are removed ("September 5, 2003",
   "on September 23, 2017", "in Deauville, France", "from the Taj Mahal Hotel"), and so are
   prepositional phrases holding only a title ("the premiere of 'Hollywood Homicide'");
3. named entities are replaced by hypernyms. The paper asks the Knowledge Graph; here a
   curator-editable mapping stands in for it: ``entity_words`` (exact names, e.g.
   "Harrison Ford" -> "actor"), the entity's own generic head word ("the 29th American Film
   Festival" -> "festival"), a title written before a name ("Musician Justin Timberlake" ->
   "musician"), then ``hypernyms`` by spaCy entity label (PERSON -> "person", GPE -> "city" or
   "country"...);
4. coordinations of the same hypernym become one plural ("actor and actor" -> "actors",
   "person and person" -> "people");
5. the text is lower-cased and tidied, and dropped when fewer than ``min_tokens`` words remain.

Every step is recorded, like the paper's "what-happened" rows (Table 1). The hypernyms used are
the caption's entity types, which ``rare_entity_types`` counts over the whole run.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .base import DROP, KEEP, Decision, Filter, Item, drop, keep
from .registry import register

# Hypernyms by spaCy entity label; "GPE:country" and "GPE:state" refine GPE for known names.
# An empty string drops the entity; a label absent from the mapping leaves its entities as written.
HYPERNYMS = {
    "PERSON": "person", "NORP": "people", "NORP:singular": "person", "FAC": "building", "ORG": "organization", "GPE": "city",
    "GPE:country": "country", "GPE:state": "state", "LOC": "location", "PRODUCT": "product",
    "EVENT": "event", "WORK_OF_ART": "artwork", "LAW": "law", "LANGUAGE": "language",
}
NAME_LABELS = frozenset(label.split(":")[0] for label in HYPERNYMS)

# A name whose head is one of these words is an instance of it: "Taj Mahal Hotel" is a hotel,
# "American Film Festival" a festival. The value is the entity type it counts as.
HEAD_WORDS = {
    **dict.fromkeys(["festival", "awards", "award", "ceremony", "premiere", "concert", "gala", "parade",
                     "marathon", "championship", "championships", "cup", "tournament", "games", "olympics",
                     "conference", "summit", "fair", "exhibition", "expo", "show", "carnival", "rally",
                     "race", "grand prix", "open"], "EVENT"),
    **dict.fromkeys(["hotel", "centre", "center", "stadium", "arena", "airport", "station", "museum", "gallery",
                     "hall", "theatre", "theater", "church", "cathedral", "temple", "mosque", "palace", "castle",
                     "tower", "bridge", "square", "street", "road", "avenue", "park", "garden", "gardens", "zoo",
                     "market", "mall", "library", "hospital", "building", "plaza", "pier", "harbour", "harbor",
                     "monument", "memorial", "abbey", "chapel", "restaurant", "office"], "FAC"),
    **dict.fromkeys(["river", "lake", "mountain", "mountains", "beach", "island", "islands", "bay", "sea",
                     "ocean", "valley", "canyon", "forest", "desert", "coast", "falls", "glacier", "hill",
                     "hills"], "LOC"),
    **dict.fromkeys(["university", "college", "school", "company", "band", "team", "club", "orchestra",
                     "choir"], "ORG"),
}

LOCATION_PREPOSITIONS = ["in", "at", "near", "from", "outside", "inside", "around", "across", "on", "over",
                         "above", "below", "under", "along", "within", "throughout", "through", "into", "onto",
                         "off", "toward", "towards", "beside", "behind", "via", "to", "between", "opposite"]

UNITS = ["km", "kilometer", "kilometre", "mile", "meter", "metre", "cm", "mm", "inch", "foot", "feet", "ft",
         "yard", "kg", "kilogram", "gram", "g", "lb", "lbs", "pound", "ounce", "oz", "ton", "tonne", "liter",
         "litre", "ml", "gallon", "mph", "kph", "%", "percent", "degree", "megapixel", "mp", "gb", "tb", "mb",
         "hp", "cc", "carat", "acre", "hectare", "storey", "story", "year", "month", "week", "day", "hour",
         "minute", "second", "piece"]

# DATE/TIME entities made only of these words say what the picture shows ("at night",
# "in winter") and stay; the others (numbers, month names, "last year") are dates and go.
KEPT_TIME_WORDS = ["night", "morning", "evening", "afternoon", "dusk", "dawn", "sunset", "sunrise", "noon",
                   "midnight", "daytime", "nighttime", "twilight", "spring", "summer", "autumn", "fall",
                   "winter", "the", "a", "an", "at", "early", "late", "sunny", "day", "days", "nights"]

HONORIFICS = frozenset(["mr", "mrs", "ms", "miss", "dr", "sir", "lady", "lord", "dame", "prof", "rev", "hon",
                        "saint", "st", "mx", "madam", "mister"])

COUNTRIES = frozenset("""afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan
bahamas bahrain bangladesh barbados belarus belgium belize benin bhutan bolivia bosnia botswana brazil brunei
bulgaria burundi cambodia cameroon canada chad chile china colombia comoros congo croatia cuba cyprus czechia
denmark djibouti dominica ecuador egypt eritrea estonia eswatini ethiopia fiji finland france gabon gambia
georgia germany ghana greece grenada guatemala guinea guyana haiti honduras hungary iceland india indonesia iran
iraq ireland israel italy jamaica japan jordan kazakhstan kenya kiribati kosovo kuwait kyrgyzstan laos latvia
lebanon lesotho liberia libya liechtenstein lithuania luxembourg madagascar malawi malaysia maldives mali malta
mauritania mauritius mexico micronesia moldova monaco mongolia montenegro morocco mozambique myanmar namibia
nauru nepal netherlands nicaragua niger nigeria norway oman pakistan palau palestine panama paraguay peru
philippines poland portugal qatar romania russia rwanda samoa senegal serbia seychelles singapore slovakia
slovenia somalia spain sudan suriname sweden switzerland syria taiwan tajikistan tanzania thailand togo tonga
tunisia turkey turkmenistan tuvalu uganda ukraine uruguay uzbekistan vanuatu venezuela vietnam yemen zambia
zimbabwe uk usa us america britain england scotland wales""".split()) | {
    "united kingdom", "united states", "united states of america", "great britain", "new zealand",
    "south africa", "south korea", "north korea", "saudi arabia", "sri lanka", "costa rica", "el salvador",
    "czech republic", "dominican republic", "united arab emirates", "the netherlands", "the uk", "the us",
    "the usa", "the united states", "the united kingdom", "ivory coast", "puerto rico", "hong kong",
    "northern ireland", "u.s.", "u.k.", "the u.s.", "vatican city", "east timor", "papua new guinea",
}
US_STATES = frozenset("""alabama alaska arizona arkansas california colorado connecticut delaware florida hawaii
idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota
mississippi missouri montana nebraska nevada ohio oklahoma oregon pennsylvania tennessee texas utah vermont
virginia washington wisconsin wyoming""".split()) | {
    "new hampshire", "new jersey", "new mexico", "north carolina", "north dakota", "rhode island",
    "south carolina", "south dakota", "west virginia",
}

QUOTES = frozenset(["'", '"', "`", "``", "''", "\u2018", "\u2019", "\u201c", "\u201d"])
OPENING = frozenset(["(", "[", "{"])
CLOSING = frozenset([")", "]", "}", ",", ".", ";", ":", "!", "?", "%"])
COMMA_LIKE = frozenset([",", ";", ":", "-", "\u2013", "\u2014", "--", "|", "/"])
FINAL = frozenset([".", "!", "?"])
MODIFIER_DEPS = frozenset(["compound", "amod", "nmod", "nummod", "npadvmod", "quantmod"])
NUMERIC_ENTS = frozenset(["CARDINAL", "QUANTITY", "PERCENT", "MONEY"])
TITLE_FUNCTION_WORDS = frozenset(["the", "a", "an", "of", "and", "in", "on", "to", "for", "at", "with", "from", "'s", "s"])
CONTENT_POS = frozenset(["NOUN", "VERB", "ADJ", "ADV"])
ARGUMENT_DEPS = frozenset(["nsubj", "nsubjpass", "dobj", "pobj", "ROOT", "attr", "dative", "oprd"])
IRREGULAR_PLURALS = {"person": "people", "man": "men", "woman": "women", "child": "children",
                     "people": "people", "foot": "feet", "mouse": "mice", "goose": "geese"}
TIME_UNITS = frozenset(["year", "years", "month", "months", "week", "weeks", "decade", "decades", "century",
                        "centuries", "hour", "hours", "minute", "minutes", "second", "seconds", "weekend"])
DEICTIC_TIME = frozenset(["today", "tonight", "yesterday", "tomorrow", "ago", "last", "next", "this", "past",
                          "recent", "recently", "every", "each", "several", "few", "current", "annual", "now"])


def pluralize(phrase: str) -> str:
    """The plural of a (possibly multi-word) English noun phrase: "pop artist" -> "pop artists"."""
    head_start = phrase.rfind(" ") + 1
    prefix, word = phrase[:head_start], phrase[head_start:]
    lower = word.lower()
    if lower in IRREGULAR_PLURALS:
        plural = IRREGULAR_PLURALS[lower]
    elif lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        plural = word[:-1] + "ies"
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        plural = word + "es"
    else:
        plural = word + "s"
    return prefix + plural


def indefinite_article(word: str) -> str:
    lower = word.lower()
    vowel = lower[:1] in ("a", "e", "i", "o", "u") and not lower.startswith(("uni", "use", "usu", "eu", "one", "uk"))
    return "an" if vowel or lower.startswith(("hour", "honest", "heir")) else "a"


@dataclass
class Mention:
    """A name in the caption: tokens [start, end), its entity label and the hypernym it becomes
    (None: leave it as written; "": drop it)."""

    start: int
    end: int
    label: str | None
    text: str
    quoted: bool = False
    title: str | None = None
    hypernym: str | None = None
    source: str = ""  # where the hypernym came from: entity_words, head word, title, label

    def tokens(self) -> range:
        return range(self.start, self.end)


@dataclass
class Unit:
    """One piece of the output: an original token or a hypernym standing for a span of tokens."""

    text: str
    first: int
    last: int
    token: object = None  # the spaCy token, for original tokens
    entity_type: str | None = None  # the hypernym (singular) this unit stands for
    mentions: tuple = ()

    @property
    def is_punct(self) -> bool:
        return self.token is not None and (self.token.is_punct or self.token.is_space)


class Prepared:
    """A filter's parameters in the shapes the rewrite looks them up in (built once per filter)."""

    def __init__(self, params: dict):
        self.entity_words = {k.lower(): v for k, v in (params["entity_words"] or {}).items()}
        self.head_words = {k.lower(): v for k, v in (params["head_words"] or {}).items()}
        self.hypernyms = params["hypernyms"] or {}
        self.location_labels = frozenset(params["location_labels"])
        self.pp_labels = frozenset(params["drop_pp_labels"])
        self.location_preps = frozenset(w.lower() for w in params["location_prepositions"])
        self.units = frozenset(w.lower() for w in params["units"])
        self.kept_time_words = frozenset(w.lower() for w in params["kept_time_words"])


class Rewrite:
    """The hypernymization of one parsed caption. ``run()`` fills ``text``, ``steps``,
    ``entity_types``, ``removed`` (token ids) and ``replaced`` (mentions replaced)."""

    def __init__(self, doc, params: dict, prepared: "Prepared | None" = None):
        self.doc = doc
        self.tk = list(doc)  # tokens made once: indexing a Doc builds a new Token each time
        self.p = params
        self.c = prepared or Prepared(params)
        self.removed: set[int] = set()
        self.location_removed: set[int] = set()
        self.replacements: dict[int, tuple[int, str, str, tuple]] = {}  # start -> (end, text, type, mentions)
        self.steps: list[tuple[int, str]] = []  # (token position, what happened)
        self.mapped_steps: dict[int, str] = {}  # mention start -> "X" mapped to "y"
        self.replaced: list[dict] = []
        self.entity_types: list[str] = []
        self.text = ""
        self.words = 0
        self.content_words = 0  # nouns, verbs, adjectives, adverbs of the original still there

    # -- helpers ---------------------------------------------------------------------------------
    def remove(self, ids, what: str | None = None, *, location: bool = False) -> None:
        ids = [i for i in ids if i not in self.removed]
        if not ids:
            return
        self.removed.update(ids)
        if location:
            self.location_removed.update(ids)
        if what:
            shown = " ".join(self.tk[i].text for i in sorted(ids) if not self.tk[i].is_punct or self.tk[i].text in "%&")
            self.steps.append((min(ids), f'{what} "{shown}" dropped'))

    @staticmethod
    def subtree(token) -> list[int]:
        return [t.i for t in token.subtree]

    # -- mentions ----------------------------------------------------------------------------------
    def quote_pairs(self) -> list[tuple[int, int]]:
        quotes = [t.i for t in self.tk if t.text in QUOTES and t.is_punct and t.tag_ != "POS"]
        return list(zip(quotes[0::2], quotes[1::2]))

    def find_mentions(self) -> list[Mention]:
        doc = self.doc
        mentions: list[Mention] = []
        taken: set[int] = set()
        # A quoted run of capitalised words is a title: 'Hollywood Homicide', 'Ocean's Eleven'.
        for a, b in self.quote_pairs():
            inside = self.tk[a + 1:b]
            words = [t for t in inside if t.is_alpha]
            if (0 < len(inside) <= 10 and words and any(t.pos_ == "PROPN" for t in inside)
                    and all(t.is_title or t.is_upper or t.lower_ in TITLE_FUNCTION_WORDS for t in words)):
                mentions.append(Mention(a + 1, b, "WORK_OF_ART", doc[a + 1:b].text, quoted=True))
                taken.update(range(a + 1, b))
        for ent in doc.ents:
            if ent.label_ not in NAME_LABELS or any(i in taken for i in range(ent.start, ent.end)):
                continue
            if not any(t.pos_ == "PROPN" or not t.is_lower for t in self.tk[ent.start:ent.end] if not t.is_punct):
                continue  # common words taken for a name: "a grey, dusty lunar surface" as a PERSON
            start, end = ent.start, ent.end
            while start < end and (self.tk[start].text in QUOTES or self.tk[start].dep_ in ("det", "predet")):
                start += 1
            while end > start and (self.tk[end - 1].is_punct or self.tk[end - 1].dep_ == "case"):
                end -= 1
            if start >= end:
                continue
            m = Mention(start, end, ent.label_, doc[start:end].text)
            # A common-noun title written before a person's name: "Musician Justin Timberlake".
            t = self.tk[start - 1] if start > 0 else None
            if (ent.label_ == "PERSON" and t is not None and t.i not in taken and t.ent_type_ == ""
                    and t.is_alpha and len(t.text) >= 3 and t.lower_ not in HONORIFICS and t.pos_ in ("NOUN", "PROPN")
                    and t.dep_ in ("compound", "amod", "nmod") and start <= t.head.i < end):
                m.start, m.title, m.text = start - 1, t.lower_, doc[start - 1:end].text
            mentions.append(m)
            taken.update(m.tokens())
        # Proper-noun runs the entity recogniser missed ("Cannes Film Festival"): no label yet.
        i = 0
        while i < len(doc):
            if self.tk[i].pos_ == "PROPN" and i not in taken and not self.tk[i].ent_type_:
                j = i
                while j < len(doc) and self.tk[j].pos_ == "PROPN" and j not in taken and not self.tk[j].ent_type_:
                    j += 1
                mentions.append(Mention(i, j, None, doc[i:j].text))
                taken.update(range(i, j))
                i = j
            else:
                i += 1
        mentions.sort(key=lambda m: m.start)
        for m in mentions:
            before, after = m.start - 1, m.end
            m.quoted = m.quoted or (before >= 0 and self.tk[before].text in QUOTES
                                    and after < len(doc) and self.tk[after].text in QUOTES)
        return mentions

    def root(self, m: Mention):
        inside = [self.tk[i] for i in m.tokens() if not (m.start <= self.tk[i].head.i < m.end) or self.tk[i].head.i == i]
        return inside[-1] if inside else self.tk[m.end - 1]

    def label_mentions(self, mentions: list[Mention]) -> None:
        doc, p = self.doc, self.p
        entity_words, head_words, hypernyms = self.c.entity_words, self.c.head_words, self.c.hypernyms
        at = {i: m for m in mentions for i in m.tokens()}
        for m in mentions:
            name = doc[m.start + (1 if m.title else 0):m.end].text
            key = name.lower()
            root = self.root(m)
            heads = [root.lower_, self.tk[m.end - 1].lower_, self.tk[m.end - 1].lemma_.lower()]
            head = next((h for h in heads if h in head_words), None)
            # The curator's names, also at the end of a longer mention ("Rapper Kanye West").
            words = m.text.lower().split()
            known = next((" ".join(words[k:]) for k in range(len(words)) if " ".join(words[k:]) in entity_words), None)
            if known is not None:
                m.hypernym = entity_words[known]
                m.label = m.label or (head_words[head] if head else "ENTITY")
                m.source = "entity_words"
                continue
            if m.quoted:  # a quoted name is a title: 'Hollywood Homicide'
                m.label = "WORK_OF_ART"
            elif head and m.label not in ("PERSON", "NORP"):
                m.label = head_words[head]
                m.hypernym = root.lower_ if head == root.lower_ else self.tk[m.end - 1].lower_
                m.source = "head word"
                continue
            elif m.label in (None, "ORG") and self.coordinated_with_person(m, at):
                m.label = "PERSON"
            if m.label == "PERSON" and m.title and p["titles_as_hypernyms"]:
                m.hypernym, m.source = m.title, "title"
                continue
            if m.label == "GPE":
                refined = "GPE:country" if key in COUNTRIES else "GPE:state" if key in US_STATES else "GPE"
                m.hypernym = hypernyms.get(refined, hypernyms.get("GPE"))
            elif m.label == "NORP" and m.label in hypernyms:
                plural = root.tag_ in ("NNPS", "NNS") or root.text.endswith("s")
                m.hypernym = hypernyms["NORP"] if plural else hypernyms.get("NORP:singular", hypernyms["NORP"])
            elif m.label:
                m.hypernym = hypernyms.get(m.label)
            m.source = "label"

    def coordinated_with_person(self, m: Mention, at: dict) -> bool:
        """"Harrison Ford and Calista Flockhart": a two- or three-word name coordinated with a person
        is a person, whatever the small model's entity recogniser says."""
        words = [self.tk[i] for i in m.tokens()]
        if not 2 <= len(words) <= 3 or not all(w.is_alpha and w.is_title for w in words):
            return False
        root = self.root(m)
        partners = [root.head] if root.dep_ == "conj" else []
        partners += [c for c in root.children if c.dep_ == "conj"]
        return any(at.get(t.i) is not None and at[t.i] is not m and at[t.i].label == "PERSON" for t in partners)

    # -- the steps ---------------------------------------------------------------------------------
    def droppable_time(self, ent) -> bool:
        kept = self.c.kept_time_words
        words = [t for t in ent if not t.is_punct]
        if any(t.like_num or t.pos_ == "PROPN" or t.lower_ in DEICTIC_TIME for t in words):
            return True
        if any(t.lower_ in TIME_UNITS for t in words):
            return True
        return not all(t.lower_ in kept for t in words)

    def run(self) -> None:
        doc, p = self.doc, self.p
        mentions = self.find_mentions()
        self.label_mentions(mentions)
        at = {i: m for m in mentions for i in m.tokens()}
        location_labels, pp_labels, location_preps = self.c.location_labels, self.c.pp_labels, self.c.location_preps
        times = [e for e in doc.ents if e.label_ in ("DATE", "TIME") and self.droppable_time(e)]
        time_tokens = {i for e in times for i in range(e.start, e.end)}

        # Prepositional phrases holding only dates, locations or titles.
        for prep in self.tk:
            if prep.dep_ != "prep" or prep.i in self.removed or not any(c.dep_ in ("pobj", "pcomp") for c in prep.children):
                continue
            inner = [t for t in prep.subtree if t.i != prep.i]
            content = [t for t in inner if not (t.is_punct or t.is_space or t.dep_ in ("det", "predet", "cc", "case", "prep"))]
            kinds = set()
            for t in content:
                m = at.get(t.i)
                if t.i in time_tokens:
                    kinds.add("date")
                elif m is not None and m.label in location_labels:
                    kinds.add("location")
                elif m is not None and m.label in pp_labels:
                    kinds.add("name")
                else:
                    kinds.add("other")
            if not content or "other" in kinds or ("location" in kinds and prep.lower_ not in location_preps):
                continue
            if "location" in kinds and len(kinds) > 1 and p["locations"] == "hypernym":
                continue  # "on April 12, 2015 in Indio": the date goes alone, the nested place becomes "in a city"
            if kinds == {"location"} and p["locations"] == "hypernym":
                first = next(at[t.i] for t in content)
                hyp = first.hypernym or "location"
                start, end = inner[0].i, inner[-1].i + 1
                text = f"{indefinite_article(hyp)} {hyp}"
                self.replacements[start] = (end, text, hyp, (first,))
                self.location_removed.update(range(start, end))  # what follows (", England") belongs to it
                self.mapped_steps[start] = f'location "{doc[start:end].text}" mapped to "{text}"'
                self.replaced.append({"text": doc[start:end].text, "label": first.label, "hypernym": hyp})
                for i in range(start, end):
                    at.pop(i, None)
                continue
            what = "location" if kinds == {"location"} else "date" if kinds == {"date"} else " and ".join(sorted(kinds))
            self.remove([prep.i] + [t.i for t in inner], what, location="location" in kinds)

        for ent in times:  # dates and durations outside prepositional phrases ("September 5, 2003")
            self.remove(range(ent.start, ent.end), "duration" if any(t.lower_ in TIME_UNITS for t in ent) else "date")

        for m in mentions:
            if self.replaced_at(m.start) is not None:
                continue  # inside a location already replaced ("in a city")
            if any(i in self.removed for i in m.tokens()):
                self.remove(m.tokens())
                continue
            root = self.root(m)
            # ", England" after a dropped "in London": the rest of the same location.
            if m.label in location_labels and root.dep_ not in ARGUMENT_DEPS:
                j = m.start - 1
                while j >= 0 and self.tk[j].is_punct and j not in self.removed:
                    j -= 1
                if j >= 0 and j in self.location_removed:
                    self.remove(range(j + 1, m.end), "location", location=True)
                    continue
            head = root.head
            if (root.dep_ in MODIFIER_DEPS and not (m.start <= head.i < m.end) and m.source != "head word"
                    and (head.pos_ in ("NOUN", "PROPN") or head.i in at) and head.i not in self.removed):
                what = "nationality modifier" if m.label == "NORP" else "proper-noun modifier"
                self.remove(sorted(set(self.subtree(root)) | set(m.tokens())), what)
                continue
            if m.hypernym is None:
                continue
            if m.hypernym == "":
                self.remove([*m.tokens(), *(c.i for i in m.tokens() for c in self.tk[i].children
                                             if c.dep_ in ("det", "case") or c.is_punct)], f"{m.label or 'name'}")
                continue
            self.replacements[m.start] = (m.end, m.hypernym, m.hypernym, (m,))
            self.mapped_steps[m.start] = f'"{m.text}" mapped to "{m.hypernym}"'
            self.replaced.append({"text": m.text, "label": m.label, "hypernym": m.hypernym, "source": m.source})

        replaced_ids = {i for s, (e, *_rest) in self.replacements.items() for i in range(s, e)}
        units = self.c.units
        for t in self.tk:  # numbers and units modifying a noun: "Two sculptures", "29th", "a 5 km race"
            if t.i in self.removed or t.i in replaced_ids or t.dep_ not in MODIFIER_DEPS:
                continue
            head = t.head
            if head.i == t.i or head.i in self.removed or not (head.pos_ in ("NOUN", "PROPN") or head.i in replaced_ids):
                continue
            number = t.like_num or t.pos_ == "NUM" or t.ent_type_ in NUMERIC_ENTS
            ordinal = t.ent_type_ == "ORDINAL" and any(ch.isdigit() for ch in t.text)
            unit = t.lower_ in units and any(c.like_num or c.pos_ == "NUM" for c in t.children)
            if number or ordinal or unit:
                ids = [i for i in self.subtree(t) if i not in replaced_ids]
                self.remove(ids, "unit" if unit else "object count" if t.dep_ == "nummod" and not ordinal else "number")

        self.tidy_tokens()
        units_out = self.build_units()
        units_out = self.merge_coordinations(units_out)
        units_out = self.tidy_units(units_out)
        self.text = self.join(units_out)
        self.words = sum(1 for u in units_out for w in u.text.split() if any(ch.isalnum() for ch in w))
        self.content_words = sum(1 for u in units_out if u.token is not None and u.token.pos_ in CONTENT_POS)
        types = []
        for u in units_out:
            if u.entity_type:
                types.append(u.entity_type)
            elif p["concept_nouns"] and u.token is not None and u.token.pos_ == "NOUN":
                types.append(u.token.lemma_.lower())
        self.entity_types = sorted(set(types))

    def tidy_tokens(self) -> None:
        """Remove what lost its word: articles and case marks of removed heads, prepositions without
        objects, "and" without conjuncts, hyphens stuck to a removed number ("3-bedroom")."""
        n = len(self.tk)
        replaced_ids = {i for s, (e, *_r) in self.replacements.items() for i in range(s, e)}
        changed = True
        while changed:
            changed = False
            for t in self.tk:
                if t.i in self.removed or t.i in replaced_ids:
                    continue
                dep = t.dep_
                dangling = (t.head.i in self.removed and t.head.i != t.i
                            and (dep in ("det", "predet", "case", "cc", "nummod", "quantmod", "poss") or t.is_punct))
                lonely_prep = dep == "prep" and self._all_removed(t, ("pobj", "pcomp"))
                lonely_cc = dep == "cc" and self._all_removed(t.head, ("conj",))
                infix = t.tag_ == "HYPH" and ((t.i > 0 and t.i - 1 in self.removed and not self.tk[t.i - 1].whitespace_)
                                               or (t.i + 1 < n and t.i + 1 in self.removed and not t.whitespace_))
                if dangling or lonely_prep or lonely_cc or infix:
                    self.removed.add(t.i)
                    changed = True
        # Quotes and brackets go in pairs: one whose partner or whose content went, goes.
        pairs = self.quote_pairs()
        stack = []
        for t in self.tk:
            if t.text in OPENING:
                stack.append(t.i)
            elif t.text in (")", "]", "}") and stack:
                pairs.append((stack.pop(), t.i))
        for a, b in pairs:
            inside = [i for i in range(a + 1, b) if i not in self.removed]
            # quotes around a hypernym quote nothing any more: 'Hey Jude' -> artwork, not 'artwork'
            only_hypernym = bool(inside) and len({self.replaced_at(i) for i in inside} - {None}) == 1 \
                and all(self.replaced_at(i) is not None for i in inside)
            if a in self.removed or b in self.removed or not inside or only_hypernym:
                self.removed.update((a, b))

    def _all_removed(self, token, deps: tuple) -> bool:
        """Whether ``token`` has children with these deps and all of them were removed."""
        found = [c.i for c in token.children if c.dep_ in deps]
        return bool(found) and all(i in self.removed for i in found)

    def replaced_at(self, i: int) -> int | None:
        """The start of the replacement covering token i, if any."""
        return next((s for s, (e, *_r) in self.replacements.items() if s <= i < e), None)

    def build_units(self) -> list[Unit]:
        out, i, doc = [], 0, self.doc
        while i < len(doc):
            if i in self.replacements:
                end, text, etype, mentions = self.replacements[i]
                out.append(Unit(text, i, end - 1, None, etype, mentions))
                i = end
                continue
            if i not in self.removed:
                t = self.tk[i]
                text = t.text
                if self.p["lowercase"] and not (t.is_upper and t.is_alpha and len(t.text) > 1) and t.text != "I":
                    text = text.lower()
                out.append(Unit(text, i, i, t))
            i += 1
        return out

    def merge_coordinations(self, units: list[Unit]) -> list[Unit]:
        """"actor and actor" -> "actors"; "person, person and person" -> "people"."""
        out, k = [], 0
        while k < len(units):
            u = units[k]
            word = u.entity_type or (u.text if u.token is not None and u.token.pos_ == "NOUN" else None)
            members, j, joined = [k], k + 1, False
            while word:
                seps = []
                while j < len(units) and (units[j].text in (",", "and", "&") and units[j].token is not None):
                    seps.append(units[j].text)
                    j += 1
                nxt = units[j] if j < len(units) else None
                same = (nxt is not None and (nxt.entity_type or nxt.text) == word
                        and (nxt.entity_type or nxt.token.pos_ == "NOUN"))
                if seps and same and all(s in (",", "and", "&") for s in seps):
                    joined = joined or any(s in ("and", "&") for s in seps)
                    members.append(j)
                    j += 1
                else:
                    break
            if len(members) > 1 and joined:
                last = units[members[-1]]
                mentions = tuple(m for idx in members for m in units[idx].mentions)
                merged = Unit(pluralize(word), u.first, last.last, None, u.entity_type or None, mentions)
                for m in mentions:
                    self.mapped_steps.pop(m.start, None)
                self.mapped_steps[u.first] = f'"{self.doc[u.first:last.last + 1].text}" mapped to "{merged.text}"'
                out.append(merged)
                k = members[-1] + 1
            else:
                out.append(u)
                k += 1
        return out

    def tidy_units(self, units: list[Unit]) -> list[Unit]:
        changed = True
        while changed:
            changed = False
            for k, u in enumerate(units):
                if u.token is None or u.text not in COMMA_LIKE:
                    continue
                prev = units[k - 1] if k > 0 else None
                nxt = units[k + 1] if k + 1 < len(units) else None
                if u.text in ("-", "/") and prev and nxt and prev.last + 1 == u.first and u.last + 1 == nxt.first:
                    continue  # an infix hyphen or slash inside a word that stays
                if (prev is None or nxt is None or (prev.token is not None and prev.text in COMMA_LIKE | OPENING)
                        or (nxt.token is not None and (nxt.text in CLOSING or nxt.token.tag_ == "''"))):
                    del units[k]
                    changed = True
                    break
        # "a aircraft" -> "an aircraft" where what follows the article changed.
        for k, u in enumerate(units[:-1]):
            if u.token is not None and u.text.lower() in ("a", "an") and u.token.dep_ == "det":
                nxt = units[k + 1]
                if nxt.token is None or nxt.first != u.last + 1:
                    article = indefinite_article(nxt.text)
                    u.text = article if u.text.islower() else article.capitalize()
        return units

    def join(self, units: list[Unit]) -> str:
        parts = []
        for k, u in enumerate(units):
            if k:
                prev = units[k - 1]
                if u.first == prev.last + 1:
                    sep = self.tk[prev.last].whitespace_
                elif (u.token is not None and (u.text in CLOSING or u.token.tag_ == "''")) or \
                        (prev.token is not None and (prev.text in OPENING or prev.token.tag_ == "``")):
                    sep = ""
                else:
                    sep = " "
                parts.append(sep)
            parts.append(u.text)
        return "".join(parts).strip()

    def what_happened(self) -> list[str]:
        steps = list(self.steps) + list(self.mapped_steps.items())
        return [text for _, text in sorted(steps, key=lambda s: s[0])]

    def char_spans(self) -> list[tuple[int, int]]:
        """Character spans of the parsed text that the output no longer has as written."""
        ids = sorted(self.removed | {i for s, (e, *_r) in self.replacements.items() for i in range(s, e)})
        spans: list[list[int]] = []
        text = self.doc.text
        for i in ids:
            t = self.tk[i]
            start, end = t.idx, t.idx + len(t.text)
            if spans and not text[spans[-1][1]:start].strip():
                spans[-1][1] = end
            else:
                spans.append([start, end])
        return [(s, e) for s, e in spans]


# --- The filters ----------------------------------------------------------------------------------

def check_int(flt: Filter, key: str, minimum: int) -> None:
    """Refuse a parameter that would fail every chunk later: the curator sees it when saving."""
    value = flt.params[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{flt.name}: {key} must be an integer >= {minimum}, not {value!r}")


@register
class Hypernymize(Filter):
    name = "hypernymize"
    label = "Hypernymization"
    version = 2  # 2: an entity of lower-case common words is no name, an adjective before a name no title
    description = ("Seed 002's text transformation: drops proper-noun, number and unit modifiers, dates, durations "
                   "and prepositional locations; replaces names with hypernyms (edit entity_words, head_words and "
                   "hypernyms); merges 'actor and actor' into 'actors'; drops captions left too short.")
    is_transform = True
    per_item = True  # each caption on its own; parses what it lacks, no database
    # The rewrite depends on the working text alone; its removed spans are placed at raw_text.find(text):
    # a duplicate caption (30% of web alt-text) is neither parsed nor rewritten again.
    text_keyed = True
    text_determined = True
    needs = frozenset({"pos", "deps", "ents", "lemma"})
    defaults = {
        "hypernyms": HYPERNYMS,
        "entity_words": {},  # exact name -> hypernym, the Knowledge Graph's stand-in: {"Justin Timberlake": "pop artist"}
        "head_words": HEAD_WORDS,
        "titles_as_hypernyms": True,  # "Musician Justin Timberlake" -> "musician" (else the label's hypernym)
        "location_labels": ["GPE", "LOC", "FAC"],
        "location_prepositions": LOCATION_PREPOSITIONS,
        "drop_pp_labels": ["WORK_OF_ART"],  # "the premiere of 'Hollywood Homicide'" -> "the premiere"
        "locations": "drop",  # or "hypernym": "in Franklin, Tennessee" -> "in a city" (Figure 1)
        "units": UNITS,
        "kept_time_words": KEPT_TIME_WORDS,
        "lowercase": True,
        "min_tokens": 3,
        "max_chars": 1000,  # longer texts are not captions: dropped unparsed
        "concept_nouns": False,  # also count the remaining nouns as entity types (the paper's "concepts")
    }

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        if self.params["locations"] not in ("drop", "hypernym"):
            raise ValueError(f"hypernymize: locations must be 'drop' or 'hypernym', not {self.params['locations']!r}")
        check_int(self, "min_tokens", 0)
        check_int(self, "max_chars", 1)
        self.prepared = Prepared(self.params)

    def apply(self, items):
        self._parse_missing(items)
        return [self.transform(item) for item in items]

    def _parse_missing(self, items: list[Item]) -> None:
        stale = [it for it in items if len(it.text or "") <= self.params["max_chars"]
                 and (it.doc is None or it.doc.text != it.text or not it.doc.has_annotation("DEP"))]
        if stale:
            from . import nlp

            docs = nlp.parse_unique([it.text for it in stale], self.needs)
            for it in stale:
                it.doc = docs[it.text]

    def transform(self, item: Item) -> Decision:
        text = item.text or ""
        if len(text) > self.params["max_chars"]:
            return drop("too_long", len(text), chars=len(text), max_chars=self.params["max_chars"])
        rw = Rewrite(item.doc, self.params, self.prepared)
        rw.run()
        steps = rw.what_happened()
        content_changed = bool(steps)
        if rw.text != text and not content_changed:
            steps = ["lower-cased"] if rw.text.lower() == text.lower() else ["tidied"]
        offset = item.raw_text.find(text) if text else -1
        if offset >= 0:
            item.removed_spans = [(s + offset, e + offset) for s, e in rw.char_spans()]
        item.entity_types = rw.entity_types
        details = {"entity_types": rw.entity_types, "steps": steps, "replaced": rw.replaced, "words": rw.words}
        new_text = rw.text if rw.text != text else None
        if rw.words < self.params["min_tokens"]:
            return Decision(DROP, "too_short", rw.words, {**details, "min_tokens": self.params["min_tokens"]}, new_text)
        # "Inconsistent" (the paper's other reason): the sentence lost its root, or nothing of what
        # it said is left but names turned into hypernyms ("organization, city, country").
        lost_roots = [s.root.text for s in item.doc.sents if s.root.i in rw.removed]
        if lost_roots or not rw.content_words:
            why = f"lost its root {lost_roots[0]!r}" if lost_roots else "only hypernyms and function words are left"
            return Decision(DROP, "inconsistent", rw.words, {**details, "why": why}, new_text)
        if content_changed:
            reason = "hypernymized"
        else:  # only the case or the spacing changed (the paper lower-cases), or nothing did
            reason = ("lower_cased" if steps == ["lower-cased"] else "tidied") if new_text is not None else "unchanged"
        return Decision(KEEP, reason, rw.words, details, new_text)


@register
class RareEntityTypes(Filter):
    name = "rare_entity_types"
    label = "Rare entity types"
    description = ("Over the whole run, keeps only captions whose entity types (the hypernyms from hypernymize) all "
                   "occur in more than min_count surviving captions (100 in the paper). Score: the rarest type's count.")
    run_level = True
    defaults = {"min_count": 100}

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        check_int(self, "min_count", 0)

    def apply(self, items):
        """This batch judged alone, as if it were the whole run (previews and tests)."""
        rows = [{"caption_id": i, "image_id": it.image_id, "entity_types": it.entity_types} for i, it in enumerate(items)]
        found = self.decide_run(rows)
        return [found[i] for i in range(len(items))]

    def decide_run(self, rows):
        min_count = self.params["min_count"]
        counts = Counter(t for row in rows for t in set(row.get("entity_types") or []))
        out = {}
        for row in rows:
            types = sorted(set(row.get("entity_types") or []))
            if not types:
                out[row["caption_id"]] = keep("no_entity_types")
                continue
            rarest = min(counts[t] for t in types)
            rare = {t: counts[t] for t in types if counts[t] <= min_count}
            out[row["caption_id"]] = (drop("rare_entity_type", rarest, rare=rare, min_count=min_count) if rare
                                      else keep("common_types", rarest, counts={t: counts[t] for t in types}))
        return out
