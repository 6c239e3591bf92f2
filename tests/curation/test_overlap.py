"""Image & text label overlap (seed 002, Section 3): a caption must share a lemma with the image's labels;
an image without labels is "not applicable", never silently kept or dropped."""
import pytest

from curation.pipeline import nlp, overlap, registry
from curation.pipeline.base import DROP, KEEP, NA, Item

# Alt-texts of seed 002 with labels of the kind a large-vocabulary image classifier gives them.
LABELLED = [
    ("Side view of a British Airways Airbus A319 aircraft on approach to land with landing gear down",
     ["Airplane", "Aircraft", "Airline", "Sky", "Aviation"], {"aircraft"}),
    ("A Pakistani worker helps to clear the debris from the Taj Mahal Hotel November 7, 2005 in Balakot, Pakistan.",
     ["Rubble", "Workers", "Demolition", "Soil"], {"workers"}),
    ("Two sculptures by artist Duncan McKellar adorn trees outside the derelict Norwich Union offices in Bristol, UK",
     [{"label": "Tree", "score": 0.93}, {"label": "Sculpture", "score": 0.88}, {"name": "Building", "score": 0.7}],
     {"tree", "sculpture"}),
    ("Musician Justin Timberlake performs at the 2017 Pilgrimage Music & Cultural Festival on September 23, 2017 "
     "in Franklin, Tennessee.", ["Performance", "Music artist", "Entertainment", "Stage", "Festival"],
     {"music artist", "festival"}),
]
# The same pictures described with other names and places keep matching the same labels.
VARIANTS = [
    ("Side view of a Lufthansa Boeing 747 aircraft on approach to land with landing gear down",
     ["Airplane", "Aircraft", "Landing gear"], {"aircraft", "landing gear"}),
    ("A Haitian worker helps to clear the debris from the Hotel Montana January 20, 2010 in Port-au-Prince, Haiti.",
     ["Rubble", "Workers", "Debris"], {"workers", "debris"}),
    ("Singer Gianna Nannini performs at the Teatro degli Arcimboldi on October 12, 2009 in Milan, Italy.",
     ["Singer", "Performance", "Concert"], {"singer"}),
]


@pytest.fixture(scope="module", autouse=True)
def spacy_loaded():
    return nlp.load(frozenset({"lemma"}))


def labelled_items(pairs) -> list[Item]:
    """Items as the executor builds them: item.labels are the names, item.metadata the image's metadata."""
    items = nlp.items_for_texts([text for text, _ in pairs], overlap.LabelOverlap.needs)
    for item, (_, labels) in zip(items, pairs):
        item.metadata = {"labels": labels} if labels is not None else {}
        item.labels = overlap.normalise_labels(labels)
    return items


def apply(pairs, **params):
    return registry.get("label_overlap")(params).apply(labelled_items(pairs))


@pytest.mark.parametrize("text, labels, expected", LABELLED + VARIANTS)
def test_a_caption_sharing_a_lemma_with_its_image_labels_is_kept(text, labels, expected):
    [decision] = apply([(text, labels)])
    assert decision.outcome == KEEP
    assert set(decision.details["matched"]) == expected
    assert decision.score == len(expected)


@pytest.mark.parametrize("text, labels", [
    ("Jimmy Barnes performs at the Sydney Entertainment Centre", ["Cat", "Whiskers", "Sofa", "Pet"]),
    ("A vendor sells churros at the market in Madrid", ["Airplane", "Sky", "Runway"]),
    ("Harrison Ford and Calista Flockhart attend the premiere of 'Hollywood Homicide'", ["Beach", "Sea", "Sand"]),
])
def test_a_caption_with_no_lemma_among_the_labels_is_dropped(text, labels):
    [decision] = apply([(text, labels)])
    assert (decision.outcome, decision.reason) == (DROP, "no_overlap")
    assert decision.details["labels"]


def test_an_image_without_labels_is_not_applicable_not_kept_or_dropped():
    decisions = apply([(LABELLED[0][0], None), (LABELLED[0][0], []), (LABELLED[0][0], ["", None, 3, {"score": 1}])])
    assert [(d.outcome, d.reason) for d in decisions] == [(NA, "no_labels")] * 3


def test_labels_an_earlier_image_labels_step_stored_are_used_when_none_were_imported():
    items = labelled_items([("Two dogs play in the snow", None), ("A vendor sells churros", None)])
    for item in items:
        item.metadata = {"predicted_labels": {"model": "clip@abc", "labels": [{"label": "dog", "score": 0.4},
                                                                             {"label": "snow", "score": 0.2}]}}
    dogs, churros = registry.get("label_overlap")({}).apply(items)
    assert (dogs.outcome, set(dogs.details["matched"])) == (KEEP, {"dog", "snow"})
    assert (churros.outcome, churros.reason) == (DROP, "no_overlap")


def test_labels_match_through_lemmas_and_plural_labels():
    [dogs, ran, geese] = apply([("Two dogs play in the snow", ["Dog", "Snow"]),
                                ("A horse ran across the field at dawn", ["Run", "Grassland"]),
                                ("A goose swims across the pond in the park", ["Geese", "Ponds"])])
    assert set(dogs.details["matched"]) == {"dog", "snow"}
    assert ran.details["matched"] == ["run"]  # "ran" is lemmatised to "run"
    assert "ponds" in geese.details["matched"]  # a plural label matches the singular in the caption


def test_low_scored_labels_are_ignored_when_the_curator_sets_a_minimum():
    labels = [{"label": "Sculpture", "score": 0.3}, {"label": "Building", "score": 0.9}]
    [decision] = apply([("A sculpture stands outside the offices in Bristol", labels)], min_label_score=0.5)
    assert (decision.outcome, decision.reason) == (DROP, "no_overlap")


def test_multiword_labels_match_by_their_words_unless_switched_off():
    pair = ("A red car parked near the cathedral", ["Sports car", "Gothic architecture"])
    [by_words] = apply([pair])
    assert by_words.details["matched"] == ["sports car"]
    [whole] = apply([pair], match_label_words=False)
    assert whole.outcome == DROP


class HarbourLabeller(overlap.ImageLabeller):
    name = "harbour"

    def labels(self, image_ids):
        return {image_id: ["Harbour", "Boat"] for image_id in image_ids}


def test_a_configured_labeller_labels_the_images_that_came_without_labels(settings):
    settings.CURATION_IMAGE_LABELLER = f"{__name__}.HarbourLabeller"
    decisions = apply([("Fishing boats in the harbour at dawn", None), ("A cat sleeps on the sofa", ["Cat"])])
    assert [(d.outcome, d.details.get("matched")) for d in decisions] == [
        (KEEP, ["harbour", "boat"]), (KEEP, ["cat"])]


def test_without_a_configured_labeller_the_metadata_labeller_is_used(settings):
    settings.CURATION_IMAGE_LABELLER = None
    assert overlap.configured_labeller() is None
    assert overlap.MetadataLabeller(labelled_items([("A dog", ["Dog"])])).labels([1, 2]) == {1: ["dog"], 2: []}


def test_a_labeller_setting_that_is_not_a_labeller_fails_loudly(settings):
    settings.CURATION_IMAGE_LABELLER = "curation.pipeline.base.Item"
    with pytest.raises(TypeError, match="CURATION_IMAGE_LABELLER"):
        apply([("Fishing boats in the harbour", None)])


@pytest.mark.parametrize("text, reason", [("", "empty"), ("   ", "empty"), ("😀🎉", "no_overlap"),
                                          ("<script>alert(1)</script>", "no_overlap"),
                                          ("Le chat dort sur le canapé.", "no_overlap")])
def test_bad_captions_get_a_decision_with_a_reason(text, reason):
    [decision] = apply([(text, ["Dog", "Beach"])])
    assert (decision.outcome, decision.reason) == (DROP, reason)


def test_a_one_megabyte_caption_left_unparsed_still_gets_a_decision():
    text = "A dog runs on the beach near the old harbour. " * 23_000
    item = Item(caption_id=1, image_id=1, raw_text=text, text=text, labels=["dog"], metadata={"labels": ["Dog"]})
    [decision] = registry.get("label_overlap")().apply([item])
    assert (decision.outcome, decision.details["matched"]) == (KEEP, ["dog"])
