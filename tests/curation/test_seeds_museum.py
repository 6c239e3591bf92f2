"""Caption seeds (seed 001 §2) on museum-style descriptions written for this test (not the paper's), graded by
hand: the seeds a cataloguer would expect ("must") and the false seeds a tagger slip or a cut segment would
give ("never"). Also the participial and appositive phrases ("X, mounted on Y, slays Z"), the part-of-speech
check against the original sentence, and the translation hook for descriptions in other languages."""
import pytest

from curation.pipeline import seed_checks
from curation.pipeline.base import DROP, KEEP
from curation.pipeline.nlp import items_for_texts
from curation.pipeline.seeds import CaptionSeeds


def triples(decision):
    return {tuple(seed[:3]) for seed in decision.details.get("seeds", [])}


# (description, grade, seeds it must give, seeds it must never give)
GRADED = [
    ("Saint Florian, dressed in armour, pours water on a burning house.", "good",
     {("person", "in", "armour")}, set()),
    ("Saint Roch, seated on a rock, shows the wound on his leg to an angel.", "good",
     {("person", "on", "rock")}, set()),
    ("The knight, mounted on a black horse, pierces the serpent with his spear.", "good",
     {("knight", "on", "horse"), ("knight", "pierces", "serpent")}, {("knight", "pierces mounted on", "horse")}),
    ("Saint Catherine, crowned with a golden crown, holds a wheel and a palm.", "good",
     {("person", "holds", "wheel")}, set()),
    ("A shepherd leaning on his staff watches the sheep on the hill.", "good",
     {("shepherd", "leaning on", "staff"), ("shepherd", "watches", "sheep")}, set()),
    ("The Madonna, enthroned beneath a canopy, nurses the child.", "good",
     {("person", "nurses", "child")}, set()),
    ("Saint Jerome kneels in the desert before a crucifix, with a lion at his side.", "good",
     {("person", "kneels before", "crucifix")}, set()),
    ("Two angels, standing on clouds, hold a crown above the Virgin.", "good",
     {("angel", "hold", "crown"), ("crown", "above", "person")}, set()),
    ("A young woman plays the lute beside a window.", "good",
     {("woman", "plays", "lute")}, set()),
    ("Saint Christopher, wading through the river, carries the child on his shoulders.", "good",
     {("person", "carries", "child")}, set()),
    # "hunter" is not in the default classes: no seed, and above all not the cut segment's "horse chases deer"
    ("The hunter, riding a grey horse, chases a deer through the forest.", "no seed",
     set(), {("horse", "chases", "deer")}),
    ("A monk reads a book at a table by candlelight.", "good",
     {("monk", "reads", "book")}, set()),
    ("Saint Peter, holding the keys, sits on a throne.", "good",
     {("person", "holding", "key"), ("person", "sits on", "throne")}, set()),
    ("The altar holding the relics is decorated with flowers.", "good",
     {("altar", "with", "flower")}, {("altar", "holding decorated with", "flower")}),
    ("Saint Martin, mounted on a grey horse, cuts his cloak with a sword for the beggar.", "good",
     {("person", "on", "horse")}, set()),
    ("The Virgin, enthroned on a golden throne, holds the child on her knee.", "good",
     {("person", "on", "throne"), ("person", "holds", "child")}, {("throne", "holds", "child")}),
    ("Two angels kneel beside the altar holding candles.", "no false seed",
     set(), {("angel", "kneel beside", "candle"), ("altar", "holding", "candle")}),
]


@pytest.fixture(scope="module")
def graded():
    flt = CaptionSeeds()
    texts = [g[0] for g in GRADED]
    return dict(zip(texts, flt.apply(items_for_texts(texts, flt.needs))))


def test_museum_descriptions_give_the_graded_seeds_and_no_false_one(graded):
    assert len(GRADED) >= 12
    missed = {text: must - triples(graded[text]) for text, _g, must, _n in GRADED if must - triples(graded[text])}
    false = {text: never & triples(graded[text]) for text, _g, _m, never in GRADED if never & triples(graded[text])}
    assert not false, false
    assert len(missed) <= 0.15 * len(GRADED), missed


def test_a_participle_between_commas_gives_its_subject_a_place_and_keeps_the_main_verb(graded):
    """The paper's own construction, with another saint and mount: the participle ("seated", "mounted")
    is no relation, its preposition is; the main verb keeps its object."""
    decision = CaptionSeeds().apply(items_for_texts(
        ["Saint Theodore, seated on a brown horse, slays the serpent with his spear."], CaptionSeeds.needs))[0]
    assert {("person", "on", "horse"), ("person", "slays", "serpent")} <= triples(decision)


def test_the_cut_segment_and_the_tagger_slip_are_refused_and_listed(graded):
    hunter = graded["The hunter, riding a grey horse, chases a deer through the forest."]
    assert hunter.outcome == DROP and "horse_chases_deer" in hunter.details["refused"]
    unchecked = CaptionSeeds({"check_pos": False}).apply(items_for_texts(
        ["The hunter, riding a grey horse, chases a deer through the forest."], CaptionSeeds.needs))[0]
    assert ("horse", "chases", "deer") in triples(unchecked)  # what the check prevents


def test_the_vocabulary_still_decides_which_entities_count():
    classes = list(CaptionSeeds.defaults["classes"]) + ["hunter"]
    decision = CaptionSeeds({"classes": classes}).apply(items_for_texts(
        ["The hunter, riding a grey horse, chases a deer through the forest."], CaptionSeeds.needs))[0]
    assert ("hunter", "chases", "deer") in triples(decision)


# --- Translation hook --------------------------------------------------------------------------------------

def italian_item(text):
    [item] = items_for_texts([text], CaptionSeeds.needs)
    item.language = "it"
    return item


def test_without_a_translation_model_a_foreign_description_says_translation_was_not_run():
    decision = CaptionSeeds().apply([italian_item("San Giorgio, a cavallo, uccide il drago.")])[0]
    assert decision.outcome == DROP
    assert decision.details["translation"] == "not run: no model configured"
    english = CaptionSeeds().apply(items_for_texts(["Saint George, on a horse, slays the dragon."],
                                                   CaptionSeeds.needs))[0]
    assert "translation" not in english.details


def test_a_configured_local_model_translates_before_the_seeds_are_read(tmp_path, monkeypatch):
    """The hook's wiring, with a stand-in for the local model (no model ships with the platform): the
    description is translated, the English is parsed and read, and the decision keeps the translation."""
    calls = []

    def fake_load(path):
        def translate(texts):
            calls.append((path, list(texts)))
            return ["Saint George, on a white horse, slays the dragon." for _ in texts]
        return translate

    monkeypatch.setattr(seed_checks, "load_translator", fake_load)
    flt = CaptionSeeds({"translation_model": str(tmp_path)})
    decision = flt.apply([italian_item("San Giorgio, su un cavallo bianco, uccide il drago.")])[0]
    assert decision.outcome == KEEP and ("person", "slays", "dragon") in triples(decision)
    assert decision.details["translation"] == "Saint George, on a white horse, slays the dragon."
    assert decision.details["translated_from"] == "it" and calls[0][0] == str(tmp_path)


def test_a_translation_model_that_is_not_a_local_directory_is_refused():
    with pytest.raises(ValueError, match="not a local model directory"):
        CaptionSeeds({"translation_model": "Helsinki-NLP/opus-mt-it-en"})
