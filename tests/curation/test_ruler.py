"""The compiled attribute-ruler matcher (curation/pipeline/ruler.py) finds exactly the matches spaCy's
Matcher finds, so every token attribute comes out the same: compared on the seed papers' alt-texts and
comments, the shared Flickr titles, non-English text, markup, emoji, whitespace runs and the spoken forms
that en_core_web_sm's longer and regular-expression rules are for; with and without the parser (whose
dependency labels some rules test)."""
import csv

import pytest
import spacy
from django.conf import settings
from spacy.pipeline import AttributeRuler

from curation.pipeline import nlp as platform_nlp
from curation.pipeline.ruler import CompiledMatcher, install

from .test_informativeness import BAD as BAD_COMMENTS
from .test_informativeness import CORPUS as COMMENTS
from .test_informativeness import NON_ENGLISH as NON_ENGLISH_COMMENTS
from .test_text_filters import FRENCH, GERMAN, PAPER_ALT_TEXTS, VARIANTS

EDGE = ["", " ", "   \n\t ", "a  dog\n\nruns   fast ", "😀🎉🔥😀", "<script>alert(1)</script>",
        '<img src="x" onerror="alert(1)"><b>A dog</b> on the <i>beach</i>', "IMG_4663", "DSC_2481.JPG", "...", "a"]
# Each exercises a kind of rule: contractions, two-token spoken forms, regular expressions, rules on the
# parser's labels (subjects and objects, auxiliaries, expletive "there", "but" as an adverb, determiners
# used as pronouns, subordinating "that").
SPOKEN = [
    "I'm gonna take a photo of the harbour, y'all.", "We gotta leave before the rain, let's go.", "C'mon, it ain't far.",
    "There's nothin' left on the old pier.", "There are two boats and there is a dog.", "Isn't it lovely? It's John's car.",
    "They'd've gone if you had asked.", "He has been painting the door all day.", "That is what I wanted to see.",
    "She said that the bridge was closed because it was raining.", "Nothing but rain all day.",
    "I saw it and you saw me.", "Do you have the tickets? I did.", "Y'all should see this.", "We ain't done yet.",
]


def corpus(extra=()):
    return PAPER_ALT_TEXTS + VARIANTS + FRENCH + GERMAN + COMMENTS + NON_ENGLISH_COMMENTS + BAD_COMMENTS + EDGE \
        + SPOKEN + list(extra)


@pytest.fixture(scope="module", params=[("parser", "lemmatizer", "ner"), ()], ids=["tagger only", "full pipeline"])
def model(request):
    return spacy.load(settings.SPACY_MODEL, exclude=list(request.param))


def spacy_matches(ruler, doc):
    return AttributeRuler.match(ruler, doc)  # the class's own method, whatever is installed on the instance


def assert_same_matches(model, texts):
    ruler = model.get_pipe("attribute_ruler")
    compiled = CompiledMatcher(ruler)
    fired = set()
    # The ruler's input: the documents as the components before it leave them.
    for doc in model.pipe(texts, disable=[n for n in model.pipe_names
                                          if model.pipe_names.index(n) >= model.pipe_names.index("attribute_ruler")]):
        expected = spacy_matches(ruler, doc)
        assert compiled(doc) == expected, doc.text
        assert compiled(doc) == expected, f"memoised: {doc.text}"
        fired |= {rule for rule, *_ in expected}
    return fired


def test_the_same_matches_as_spacys_matcher(model):
    fired = assert_same_matches(model, corpus())
    ruler = model.get_pipe("attribute_ruler")
    longer = {i for i, entry in enumerate(ruler.patterns) if any(len(p) > 1 for p in entry["patterns"])}
    regex = {i for i, entry in enumerate(ruler.patterns) if "REGEX" in str(entry["patterns"])}
    on_labels = {i for i, entry in enumerate(ruler.patterns) if "'DEP'" in str(entry["patterns"])}
    assert len(fired) >= 60  # most of the tag map, and the exceptions below
    assert len(fired & longer) >= 4 and fired & regex
    if "parser" in model.pipe_names:
        assert len(fired & on_labels) >= 5
    else:
        assert not fired & on_labels  # without a parse, rules on dependency labels cannot match


def test_the_same_matches_on_the_flickr_titles(model, shared_photos):
    with open(shared_photos / "credits.csv", newline="", encoding="utf-8") as fh:
        titles = [row["Title"] for row in csv.DictReader(fh)]
    assert len(titles) >= 15
    assert_same_matches(model, titles)


def annotations(doc):
    return [(t.text, t.tag_, t.pos_, str(t.morph), t.lemma_, t.dep_, t.head.i, t.ent_type_, t.is_sent_start)
            for t in doc]


def test_every_token_attribute_is_the_same_with_the_compiled_matcher(model):
    texts = corpus()
    before = [annotations(doc) for doc in model.pipe(texts)]
    assert install(model)
    assert "match" in vars(model.get_pipe("attribute_ruler"))
    try:
        after = [annotations(doc) for doc in model.pipe(texts)]
    finally:
        del model.get_pipe("attribute_ruler").match
    for text, expected, found in zip(texts, before, after):
        assert found == expected, text
    # The case of the examples above: "gonna" is "gon" + "na", lemmatised "go" + "to" by the longer rules.
    gonna = dict(zip(texts, after))[SPOKEN[0]]
    assert [(t[0], t[4]) for t in gonna if t[0] in ("gon", "na")] == [("gon", "go"), ("na", "to")]


def test_the_platforms_loader_installs_it_and_the_setting_turns_it_off(settings):
    ruler = platform_nlp.load(frozenset({"pos"})).get_pipe("attribute_ruler")
    assert "match" in vars(ruler)
    settings.SPACY_COMPILED_RULER = False
    platform_nlp.load.cache_clear()
    try:
        plain = platform_nlp.load(frozenset({"pos"})).get_pipe("attribute_ruler")
        assert "match" not in vars(plain)
    finally:
        platform_nlp.load.cache_clear()


def blank_with_rules(*rules):
    model = spacy.blank("en")
    ruler = model.add_pipe("attribute_ruler")
    for patterns, attrs in rules:
        ruler.add(patterns, attrs)
    return model, ruler


def test_a_rule_outside_what_it_reproduces_keeps_spacys_matcher():
    model, ruler = blank_with_rules(([[{"LOWER": "dog", "OP": "+"}]], {"POS": "NOUN"}))
    assert install(model) is False
    assert "match" not in vars(ruler)
    assert [t.pos_ for t in model("dog dog cat")] == ["NOUN", "NOUN", ""]


def test_rules_added_after_installation_are_compiled_or_hand_back_to_spacy():
    model, ruler = blank_with_rules(([[{"LOWER": "dog"}]], {"POS": "NOUN"}),
                                    ([[{"LOWER": {"IN": ["runs", "sits"]}}]], {"POS": "VERB"}))
    assert install(model)
    assert [t.pos_ for t in model("The dog runs")] == ["", "NOUN", "VERB"]
    ruler.add([[{"ORTH": "The"}, {"LOWER": "dog"}]], {"POS": "DET"}, index=0)
    doc = model("The dog runs and the dog sits")
    assert [t.pos_ for t in doc] == ["DET", "NOUN", "VERB", "", "", "NOUN", "VERB"]
    assert CompiledMatcher(ruler)(doc) == spacy_matches(ruler, doc)
    ruler.add([[{"LOWER": "cat", "OP": "?"}, {"LOWER": "and"}]], {"POS": "CCONJ"}, index=-1)
    assert [t.pos_ for t in model("The dog and the cat")] == ["DET", "NOUN", "CCONJ", "", ""]
    assert "match" not in vars(ruler)  # back to spaCy's matcher, which handles the operator
    assert [t.pos_ for t in model("cat and dog")][:2] == ["", "CCONJ"]


def test_later_rules_take_precedence_as_with_spacy():
    model, ruler = blank_with_rules(([[{"LOWER": "light"}]], {"POS": "NOUN"}),
                                    ([[{"LOWER": "light"}, {"LOWER": "blue"}]], {"POS": "ADJ"}),
                                    ([[{"LOWER": {"REGEX": "^li"}}]], {"LEMMA": "lit"}))
    expected = [(t.pos_, t.lemma_) for t in model("light blue light")]
    install(model)
    assert [(t.pos_, t.lemma_) for t in model("light blue light")] == expected == [("ADJ", "lit"), ("", ""),
                                                                                     ("NOUN", "lit")]
