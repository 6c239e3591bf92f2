"""Hypernymization's safeguards (issue 24): entity types checked before mapping, titled names coordinated,
names that must not survive, garbled rewrites dropped, uncertain rewrites sent to review, and the
rare-entity-type minimum relative to the run. Each on captions written for the test, as a curator would
meet them in a lab's first collection of news and stock photos."""
import pytest

from curation.pipeline import nlp
from curation.pipeline.base import DROP, KEEP
from curation.pipeline.hypernym import Hypernymize, RareEntityTypes, consistency
from curation.pipeline.hypernym.sanity import Gazetteer, packaged

from .release_helpers import review_guesses_run


def one(text, **params):
    flt = Hypernymize(params)
    items = nlp.items_for_texts([text], flt.needs)
    return items[0], flt.apply(items)[0]


# --- Entity types checked before mapping --------------------------------------------------------------

@pytest.mark.parametrize("text,expected,wrong", [
    # the small model's label would give "city", "person", "person": the gazetteer and given names correct it
    ("Beyonce sings on stage during her concert in Houston.", "person sings on stage during her concert.", "city"),
    ("Visitors photograph the Statue of Liberty from a ferry.", "visitors photograph the statue from a ferry.", "person"),
    ("A designer sketches on an iPad Pro in her studio.", "a designer sketches on a tablet in her studio.", "person"),
    ("A Dalmatian named Pepper runs along the shore.", "a dalmatian runs along the shore.", "city named"),
])
def test_an_entity_whose_label_contradicts_the_gazetteer_or_a_given_name_is_not_mapped_blindly(text, expected, wrong):
    _, decision = one(text)
    assert (decision.outcome, decision.text) == (KEEP, expected)
    assert wrong not in decision.text


def test_a_place_that_performs_is_taken_for_a_person_and_the_guess_is_marked_uncertain():
    """Juno photographs a caption whose singer the recogniser missed: the subject of "speaks" is a person,
    but only context says so, and the decision says it is a guess."""
    _, decision = one("Elon Musk speaks at a conference.")
    assert decision.text == "person speaks at a conference."
    assert decision.reason == "hypernymized"
    assert "subject of 'speaks'" in decision.details["uncertain"][0]


def test_a_curator_extends_the_gazetteer_and_lists_names_that_must_never_survive():
    text = "the old harry rocks glow in the evening light"
    _, plain = one(text)
    assert "rock" not in (plain.text or "")  # unknown to the packaged lists
    _, known = one(text, gazetteer={"landmarks": {"Old Harry Rocks": "rock formation"}})
    assert known.text == "the rock formation glow in the evening light"
    caption = "A portrait of bramble finch smiling on the porch."  # lower case: no recogniser finds it
    _, unlisted = one(caption)
    assert unlisted.outcome == KEEP
    _, named = one(caption, names=["Bramble  Finch"])
    assert (named.outcome, named.reason, named.details["names"]) == (DROP, "name_left", ["bramble finch"])


def test_the_packaged_gazetteer_has_its_sections_and_a_licence_note():
    from pathlib import Path

    data = packaged()
    for key in ("person_names", "landmarks", "products", "organisations", "breeds", "title_groups", "person_verbs"):
        assert data[key], key
    note = Path(__file__).resolve().parents[2] / "curation" / "pipeline" / "data" / "hypernym_gazetteer.LICENSE.md"
    assert "Licence" in note.read_text()
    g = Gazetteer({"products": {"Zephyr X2": "drone"}})
    assert g.lookup("the Zephyr X2") == ("PRODUCT", "drone") and g.lookup("iPhones") == ("PRODUCT", "phones")


# --- Coordination of titled names ---------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("Senator Bernie Sanders and Senator Elizabeth Warren wave to the crowd.", "senators wave to the crowd."),
    ("Mayor Eric Adams and Governor Kathy Hochul cut a ribbon at the new station.",
     "politicians cut a ribbon at the new station."),
    ("Singer Harry Styles and actress Florence Pugh arrive at the festival.", "people arrive at the festival."),
])
def test_titled_names_in_a_coordination_become_one_plural(text, expected):
    _, decision = one(text)
    assert decision.text == expected


# --- Names left, garbled rewrites ---------------------------------------------------------------------

def test_a_capitalised_name_the_recogniser_missed_drops_the_caption_with_name_left():
    _, decision = one("A woman reads a book by Hartwell at a table.")
    assert (decision.outcome, decision.reason, decision.details["names"]) == (DROP, "name_left", ["Hartwell"])


def test_title_case_stock_captions_and_lower_case_slips_of_the_tagger_are_not_taken_for_names():
    _, titled = one("Young Woman Drinking Coffee In A Cozy Cafe")
    assert titled.reason != "name_left"
    _, slip = one("A baker pulls fresh bread out of the oven.")  # en_core_web_sm tags "oven" PROPN
    assert slip.outcome == KEEP


def test_a_rewrite_whose_structure_broke_is_dropped_as_inconsistent():
    """The rewrite check itself, on a rewrite where a hypernym lands next to a noun that it does not modify."""
    flt = Hypernymize()
    item = nlp.items_for_texts(["A Labrador sleeps."], flt.needs)[0]
    from curation.pipeline.hypernym.detect import Mention
    from curation.pipeline.hypernym.rewrite import Rewrite
    from curation.pipeline.hypernym.units import Unit

    rw = Rewrite(item.doc, flt.params, flt.prepared)
    rw.run()
    tk = list(item.doc)
    person = Mention(0, 1, "PERSON", "A", hypernym="person", source="label")
    broken = [Unit("actress", 1, 1, tk[1]), Unit("person", 2, 2, None, "person", (person,))]
    assert "run together" in consistency.garbled(rw, broken)
    assert consistency.garbled(rw, rw.units_out) is None


def test_a_rewrite_that_loses_its_only_preposition_fails_the_text_filters_again():
    _, decision = one("Kamala Harris and Tim Walz greet volunteers in Philadelphia.")
    assert (decision.outcome, decision.reason) == (DROP, "inconsistent")
    assert decision.details["lost"] == ["preposition"]
    _, kept = one("Kamala Harris and Tim Walz greet volunteers in Philadelphia.", recheck=["noun"])
    assert (kept.outcome, kept.text) == (KEEP, "people greet volunteers.")


# --- Uncertain rewrites --------------------------------------------------------------------------------

@pytest.mark.parametrize("choice,outcome", [("review", KEEP), ("drop", DROP)])
def test_an_uncertain_rewrite_goes_to_review_or_is_dropped_with_uncertain_rewrite(choice, outcome):
    text = "Tourists ride camels near the pyramids of Giza in Egypt."
    _, guessed = one(text)
    assert guessed.reason == "hypernymized" and guessed.details["uncertain"]
    _, decision = one(text, on_uncertain=choice)
    assert (decision.outcome, decision.reason) == (outcome, "uncertain_rewrite")
    assert decision.text == guessed.text and decision.details["uncertain"] == guessed.details["uncertain"]


def test_bad_parameters_are_refused_when_the_curator_saves_them():
    with pytest.raises(ValueError, match="on_uncertain"):
        Hypernymize({"on_uncertain": "ask"})
    with pytest.raises(ValueError, match="recheck"):
        Hypernymize({"recheck": ["verb"]})
    with pytest.raises(ValueError, match="gazetteer"):
        Hypernymize({"gazetteer": {"planets": {}}})
    with pytest.raises(ValueError, match="names"):
        Hypernymize({"names": "Old Harry"})
    with pytest.raises(ValueError, match="min_share"):
        RareEntityTypes({"min_share": 2})


# --- Rare entity types relative to the run --------------------------------------------------------------

def test_the_rare_type_minimum_is_a_share_of_the_run_capped_by_the_papers_count():
    """A first collection of 40 captions: with the paper's 100 every caption with a type is dropped; with
    min_share 0.05 the minimum is 2, so only the type seen twice or less goes."""
    rows = ([{"caption_id": i, "image_id": i, "entity_types": ["person"]} for i in range(30)]
            + [{"caption_id": 30 + i, "image_id": 30 + i, "entity_types": ["festival"]} for i in range(2)]
            + [{"caption_id": 32 + i, "image_id": 32 + i, "entity_types": []} for i in range(8)])
    paper = RareEntityTypes().decide_run(rows)
    assert sum(d.outcome == DROP for d in paper.values()) == 32
    relative = RareEntityTypes({"min_share": 0.05}).decide_run(rows)
    assert relative[0].outcome == KEEP and relative[30].outcome == DROP
    assert relative[30].details["min_count"] == 2
    assert RareEntityTypes({"min_share": 0.5}).threshold(3_300_000) == 100  # web scale: the paper's count


# --- Through a run: curators find the uncertain rewrites on the step page --------------------------------

@pytest.mark.django_db
def test_a_run_sends_uncertain_rewrites_to_review_where_curators_filter_them(monkeypatch, alice_client):
    """Alice runs hypernymization with on_uncertain="review" over three stock captions: the one whose
    rewrite rests on a guess is kept with the reason uncertain_rewrite, and the step page filtered on that
    reason lists it and only it."""
    from curation.models import Caption, Collection, FilterDecision, Image

    collection = Collection.objects.create(name="desert trip")
    texts = ["Tourists ride camels near the pyramids of Giza in Egypt.",
             "A farmer harvests rice in a paddy field in Bali, Indonesia.",
             "A mother reads a bedtime story to her daughter."]
    for i, text in enumerate(texts):
        image = Image.objects.create(collection=collection, external_id=f"d{i}", format="JPEG", width=640,
                                     height=480, sha256=f"{i + 3}" * 64)
        Caption.objects.create(image=image, text=text, origin="alt_text")
    run = review_guesses_run(collection, name="hyp-review")
    uncertain = FilterDecision.objects.get(run=run, reason="uncertain_rewrite")
    assert uncertain.caption.text == texts[0] and uncertain.outcome == KEEP
    assert "Giza" in uncertain.details["uncertain"][0]
    page = alice_client.get(f"/runs/{run.pk}/steps/0/?tab=keep&reason=uncertain_rewrite").content.decode()
    assert "camels" in page and "paddy" not in page and "bedtime" not in page


def test_rare_entity_types_decides_batch_by_batch_as_it_would_over_the_whole_run():
    """The executor streams the survivors once (prepare_run), then hands them over in batches."""
    from curation.pipeline.hypernym.filters import RareEntityTypes

    types = [["actor"], ["actor", "city"], ["singer"], ["city"], [], ["actor"], ["tower"], ["city", "singer"]] * 5
    rows = [{"caption_id": i, "image_id": i // 2, "entity_types": t} for i, t in enumerate(types)]
    whole = RareEntityTypes({"min_count": 100, "min_share": 0.2}).decide_run(rows)
    batched = RareEntityTypes({"min_count": 100, "min_share": 0.2})
    batched.prepare_run(iter(rows))
    by_batch = {}
    for start in range(0, len(rows), 7):
        by_batch.update(batched.decide_run(rows[start:start + 7]))
    assert {k: (d.outcome, d.reason, d.score) for k, d in by_batch.items()} == \
           {k: (d.outcome, d.reason, d.score) for k, d in whole.items()}
    assert {d.reason for d in whole.values()} == {"rare_entity_type", "common_types", "no_entity_types"}
    assert RareEntityTypes.run_shard == "row"
