"""Caption seeds from museum descriptions (seed 001, Section 2): names and pronouns become
"person", adnominal -ing clauses become present continuous, segments run from class word to class
word, and subject-relation-object seeds come from the heads of the segment's parse."""
import pytest

from curation.models import Caption, CaptionSeed, Collection, FilterRun, Image
from curation.pipeline import registry
from curation.pipeline.base import DROP, KEEP, Item
from curation.pipeline.nlp import items_for_texts
from curation.pipeline.seed_words import verb_forms
from curation.pipeline.seeds import CaptionSeeds, save_seeds


@pytest.fixture(scope="module")
def seeds_filter():
    return CaptionSeeds()


def run_seeds(flt, texts):
    return flt.apply(items_for_texts(texts, flt.needs))


def triples(decision):
    return {tuple(seed[:3]) for seed in decision.details.get("seeds", [])}


# --- The paper's sentences and variants with other names, animals and places --------------------------

@pytest.mark.parametrize("text, rider, mount, enemy, verb", [
    ("Saint George, on a white horse, slays the dragon.", "person", "horse", "dragon", "slays"),
    ("Saint Theodore, on a brown horse, kills the serpent.", "person", "horse", "serpent", "kills"),
    ("St Demetrius, on a black horse, slays the dragon.", "person", "horse", "dragon", "slays"),
    ("Maria Lopez, on a grey donkey, kills the snake.", "person", "donkey", "snake", "kills"),
])
def test_a_rider_slaying_a_dragon_gives_a_mount_seed_and_an_action_seed(seeds_filter, text, rider, mount, enemy, verb):
    [decision] = run_seeds(seeds_filter, [text])
    assert decision.outcome == KEEP
    assert {(rider, "on", mount), (rider, verb, enemy)} <= triples(decision)
    assert decision.score == len(decision.details["seeds"])
    assert all(seed[3] == text for seed in decision.details["seeds"])


@pytest.mark.parametrize("text, expected", [
    ("St Demetrius on a horse.", ("person", "on", "horse")),  # the paper's example of name substitution
    ("Saint Martin on a horse.", ("person", "on", "horse")),
    ("Miracle of St George with the dragon.", ("person", "with", "dragon")),  # the paper's segmentation example
    ("Miracle of Saint Michael with the dragon.", ("person", "with", "dragon")),
    ("Emperor Charles V kneels before the altar.", ("person", "kneels before", "altar")),  # role + name
    ("Emperor Maximilian kneels before the altar.", ("person", "kneels before", "altar")),
    ("The bishop wears a mitre.", ("bishop", "wears", "mitre")),  # "the bishop wears..." snippets
    ("The monk holds a book.", ("monk", "holds", "book")),
])
def test_the_papers_sentences_and_their_variants_give_their_seeds(seeds_filter, text, expected):
    [decision] = run_seeds(seeds_filter, [text])
    assert expected in triples(decision)


@pytest.mark.parametrize("text, subject, obj", [
    ("A person riding a horse.", "person", "horse"),
    ("A man riding a horse near the castle.", "man", "horse"),
    ("A woman feeding a lamb under a tree.", "woman", "lamb"),
])
def test_adnominal_ing_clauses_become_present_continuous(seeds_filter, text, subject, obj):
    [decision] = run_seeds(seeds_filter, [text])
    [segment] = decision.details["segments"]
    assert f"{subject} is " in segment
    assert any(s == subject and o == obj and r.endswith("ing") for s, r, o in triples(decision))


def test_a_plural_noun_gets_are(seeds_filter):
    [decision] = run_seeds(seeds_filter, ["Two angels carrying a crown."])
    assert "angels are carrying a crown" in decision.details["segments"][0]
    assert ("angel", "carrying", "crown") in triples(decision)


@pytest.mark.parametrize("text, expected", [
    ("She is holding a book.", ("person", "holding", "book")),
    ("He holds a sword in his right hand.", ("person", "holds", "sword")),
    ("They ride a camel across the river.", ("person", "ride", "camel")),
])
def test_third_person_pronouns_become_person(seeds_filter, text, expected):
    [decision] = run_seeds(seeds_filter, [text])
    assert expected in triples(decision)


def test_a_possessive_pronoun_is_not_an_entity_of_its_own(seeds_filter):
    [decision] = run_seeds(seeds_filter, ["Saint Michael, riding a horse, kills the serpent with his spear."])
    found = triples(decision)
    assert {("person", "riding", "horse"), ("person", "kills", "serpent"), ("person", "kills with", "spear")} <= found
    assert not any(o == "person" for _, _, o in found)


def test_a_passive_sentence_keeps_the_parsers_subject(seeds_filter):
    [decision] = run_seeds(seeds_filter, ["The dragon is slain by Saint George."])
    assert ("dragon", "slain by", "person") in triples(decision)


def test_names_ner_misses_are_replaced_from_the_name_list():
    text = "Wenceslas rides a horse near the church."
    [without] = run_seeds(CaptionSeeds(), [text])
    assert not any(s == "person" for s, _, _ in triples(without))
    [with_name] = run_seeds(CaptionSeeds({"names": ["Wenceslas"]}), [text])
    assert ("person", "rides", "horse") in triples(with_name)


def test_every_sentence_of_a_description_is_read(seeds_filter):
    text = ("The Virgin Mary sits on a throne with the child on her lap. Saint Joseph stands behind her. "
            "The panel was restored in 1998.")
    [decision] = run_seeds(seeds_filter, [text])
    found = triples(decision)
    assert ("person", "sits on", "throne") in found and ("person", "stands behind", "person") in found
    assert {seed[3] for seed in decision.details["seeds"]} == {
        "The Virgin Mary sits on a throne with the child on her lap.", "Saint Joseph stands behind her."}


# --- No seed ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "The painting was made in 1520 by an unknown master.",
    "Oil on canvas, signed and dated lower left.",
    "Acquired by the museum in 1911 from a private collection in Vienna.",
])
def test_a_sentence_without_class_words_gives_no_seed(seeds_filter, text):
    [decision] = run_seeds(seeds_filter, [text])
    assert (decision.outcome, decision.reason) == (DROP, "no_seed")


# --- Editable vocabularies -------------------------------------------------------------------------------

def test_the_class_vocabulary_decides_which_entities_count():
    text = "Saint George, on a white horse, slays the dragon."
    [decision] = run_seeds(CaptionSeeds({"classes": ["horse"]}), [text])
    assert triples(decision) == {("person", "on", "horse")}  # "person" is always a class


def test_the_relation_vocabulary_decides_which_verbs_count():
    text = "Saint George, on a white horse, slays the dragon."
    [decision] = run_seeds(CaptionSeeds({"relations": ["on"]}), [text])
    assert triples(decision) == {("person", "on", "horse")}
    [decision] = run_seeds(CaptionSeeds({"relations": ["slay"]}), [text])
    assert triples(decision) == {("person", "slays", "dragon")}


def test_relations_match_any_inflection_of_the_listed_verb():
    assert {"ride"} <= verb_forms("riding", "rid") and {"ride"} <= verb_forms("rides", "rid")
    assert "slay" in verb_forms("slain") and "hold" in verb_forms("held") and "sit" in verb_forms("sitting")


def test_bad_vocabularies_are_refused():
    with pytest.raises(ValueError, match="classes"):
        CaptionSeeds({"classes": "horse"})


# --- Bad input -------------------------------------------------------------------------------------------

def test_bad_descriptions_get_decisions(seeds_filter):
    bad = ["", "😀🐉🐎", "<script>alert('dragon')</script>", "<b>Saint George</b> on a <i>horse</i>",
           "San Jorge, a caballo, mata al dragón.", "horse horse horse horse"]
    decisions = run_seeds(seeds_filter, bad)
    assert len(decisions) == len(bad) and all(d.outcome in (KEEP, DROP) for d in decisions)
    assert decisions[0].reason == "no_seed"


def test_a_description_without_a_parse_is_dropped_as_unparsed(seeds_filter):
    huge = "Saint George slays the dragon. " * 40000
    [decision] = seeds_filter.apply([Item(caption_id=1, image_id=1, raw_text=huge, text=huge)])
    assert (decision.outcome, decision.reason) == (DROP, "unparsed")


def test_a_long_description_reads_at_most_max_sentences():
    text = "Saint George slays the dragon. " * 30
    [decision] = run_seeds(CaptionSeeds({"max_sentences": 3}), [text])
    assert decision.outcome == KEEP and len(decision.details["segments"]) <= 3


def test_the_step_is_registered_with_what_it_needs():
    cls = registry.get("caption_seeds")
    assert cls is CaptionSeeds and cls.needs == frozenset({"pos", "deps", "ents", "lemma"}) and cls.text_only


# --- Saving ----------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_seeds_are_saved_once_per_caption_and_run(seeds_filter):
    collection = Collection.objects.create(name="museum")
    image = Image.objects.create(collection=collection, external_id="sgoab-1")
    text = "Saint George, on a white horse, slays the dragon."
    caption = Caption.objects.create(image=image, text=text, origin=Caption.Origin.MUSEUM)
    run = FilterRun.objects.create(collection=collection)
    [decision] = run_seeds(seeds_filter, [text])

    assert save_seeds(run, caption.pk, decision.details["seeds"]) == len(decision.details["seeds"])
    save_seeds(run.pk, caption.pk, decision.details["seeds"])  # a chunk that runs twice
    saved = CaptionSeed.objects.filter(caption=caption, run=run)
    assert saved.count() == len(decision.details["seeds"])
    slay = saved.get(relation="slays")
    assert (slay.subject, slay.object, slay.sentence, str(slay)) == ("person", "dragon", text, "person_slays_dragon")
    save_seeds(run, caption.pk, [["person", "on", "horse"]])  # the sentence may be left out
    assert saved.count() == len(decision.details["seeds"])
