"""AVA-Captions comment cleaning and the informativeness score (seed 000, Section 3), on the
comments the paper prints (Figure 2, supplementary Table 1) and on variants of them."""
import json
import math

import pytest

from curation.pipeline import informativeness as inf
from curation.pipeline import registry
from curation.pipeline.base import DROP, KEEP, Item
from curation.pipeline.nlp import items_for_texts

POS = frozenset({"pos"})

# Figure 2 of the paper, in the order of its scores (9.62, 1.85, 28.41, 47.44).
FIGURE_2 = [
    "Photo Quality : Awesome",
    "I love the colors here",
    "I like the trees in the background and the softness of the water.",
    "The post processing looks great with the water, but the top half of the photo doesn't work as well.",
]

# Supplementary Table 1: comments the authors' strategy kept (score >= 20) and discarded.
TABLE_1_KEPT = [
    "Colors are a little too green and there's no central composition.",
    "imo would have been better if you had desaturated the red channel to get rid of the glow on the phone (distracting)",
    "There is little contrast (either in color or angle) to this image, so it feels a bit flat.",
    "Beautiful. The blue is perfect for the dark background and the sense of moving light is great.",
    "Love the colors in this shot. And the curved horizon gives the shot a neat earthy-globe feel.",
]
TABLE_1_DISCARDED = [
    "very interesting shot.",
    "Why posting so small pictures?",
    "That horse looks nervous :)",
    "hahaha i love this one.....",
    "Simply cool, well done my friend.",
]

# A comment corpus in the style of AVA: many "safe" comments, some descriptive critiques.
SAFE = [
    "Great shot, nice colors!", "Nice shot!", "Great colors, nice shot.", "Very nice shot, great colors.",
    "Nice colors and great composition.", "Great shot! Love the colors.", "Nice composition, great shot.",
    "Great colors here, nice shot.", "Nice shot, I love the colors.", "Beautiful colors, great shot!",
    "Great composition and nice colors.", "Nice shot, great job.", "Great job, nice colors.",
    "Nice colors, nice shot, great composition.", "Awesome shot, great colors!", "Great shot, nice composition!",
    "Love the colors, great shot.", "Nice job, great colors.", "Great shot and nice colors.",
    "Nice colors! Great shot!",
]
DESCRIPTIVE = [
    "The old fisherman's weathered hands tell a long story.",
    "A foggy harbour at dawn with the lighthouse barely visible.",
    "The shallow depth of field isolates the dragonfly nicely.",
    "Leading lines of the railway tracks pull the eye to the horizon.",
    "The red umbrella against the grey street is a strong focal point.",
    "Negative space on the left balances the lonely tree.",
    "The reflection of the mountains in the still lake is superb.",
    "Harsh midday light blows out the white dress of the bride.",
    "The slow shutter turns the waterfall into soft silk.",
    "Rule of thirds puts the cyclist exactly on the intersection.",
]
CORPUS = SAFE + DESCRIPTIVE + FIGURE_2 + TABLE_1_KEPT + TABLE_1_DISCARDED

NON_ENGLISH = [
    "Sehr schönes Bild, die Farben gefallen mir sehr gut.",
    "Très belle photo, j'adore les couleurs et la lumière.",
    "Me gusta mucho la composición de esta foto.",
    "Bella foto, mi piace molto la luce del tramonto.",
]


@pytest.fixture(scope="module")
def corpus_items():
    return items_for_texts(CORPUS, POS)


@pytest.fixture(scope="module")
def state(corpus_items):
    return inf.Informativeness().fit(corpus_items)


def scores(state, texts, **params):
    flt = inf.Informativeness({"min_rho": None, "max_rho": None, **params}, state=state)
    return [d.score for d in flt.apply(items_for_texts(texts, POS))]


# --- Cleaning ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, squeezed", [("woooow", "woow"), ("wooooooooow", "woow"), ("sooo niiiice", "soo niice"),
                                           ("cool", "cool"), ("aaaah 1111", "aah 1111")])
def test_letter_runs_of_three_or_more_are_squeezed_to_two(raw, squeezed):
    assert inf.squeeze_letters(raw) == squeezed


def test_punctuation_runs_become_one_mark_and_the_comment_is_lower_cased():
    assert inf.squeeze_punctuation("Wow!!!! Really???") == "Wow! Really?"
    assert inf.clean_comment("WOOOOW!!!!  Beautiful lighting and colours....such a serene image") == \
        "woow! beautiful lighting and colours.such a serene image"
    assert inf.comment_words("hahaha i love this one.....") == ["hahaha", "i", "love", "this", "one"]


@pytest.fixture(scope="module")
def clean():
    return inf.CommentClean()


def clean_decisions(flt, texts):
    return flt.apply(items_for_texts(texts))


def test_the_papers_kept_comments_pass_the_cleaning(clean):
    decisions = clean_decisions(clean, TABLE_1_KEPT + FIGURE_2[2:])
    assert [d.outcome for d in decisions] == [KEEP] * 7


def test_comments_of_fewer_than_five_words_are_too_short(clean):
    decisions = clean_decisions(clean, ["very interesting shot.", "That horse looks nervous :)",
                                        "Photo Quality : Awesome", "Nice one!!!!"])
    assert [(d.outcome, d.reason) for d in decisions] == [(DROP, "too_short")] * 4
    assert decisions[1].details["tokens"] == 4


@pytest.mark.parametrize("text, words", [
    ("Congrats on the ribbon, well deserved for this lovely portrait.", ["congrats", "ribbon"]),
    ("This fits the challenge perfectly, the empty bed says it all.", ["challenge"]),
    ("I voted high on this one because of the wonderful light.", ["voted"]),
    ("Your SCORE should be higher, the silhouette is stunning.", ["score"]),
])
def test_comments_about_the_site_rather_than_the_photo_are_dropped(clean, text, words):
    [decision] = clean_decisions(clean, [text])
    assert (decision.outcome, decision.reason, decision.details["words"]) == (DROP, "site_words", words)


def test_site_words_are_a_parameter():
    flt = inf.CommentClean({"site_words": ["entry"]})
    decisions = clean_decisions(flt, ["Congrats on the ribbon, well deserved for this lovely portrait.",
                                      "A very strong entry with lovely soft light on the face."])
    assert [d.reason for d in decisions] == ["", "site_words"]


def test_non_english_comments_are_dropped_with_the_detected_language(clean):
    decisions = clean_decisions(clean, NON_ENGLISH)
    assert [(d.outcome, d.reason) for d in decisions] == [(DROP, "wrong_language")] * 4
    assert [d.details["detected"] for d in decisions] == ["de", "fr", "es", "it"]


def test_plain_english_is_not_sent_to_the_language_detector(clean, monkeypatch):
    asked = []
    def detect(texts, candidates, accuracy="high"):
        asked.extend(texts)
        return [None] * len(texts)

    monkeypatch.setattr(inf, "detect_languages", detect)
    clean_decisions(clean, TABLE_1_KEPT + TABLE_1_DISCARDED + SAFE + ["Nice colors, nice shot, great composition.",
                                                                      "😀😀😀🔥🔥"])
    assert asked == []


def test_a_short_comment_in_another_alphabet_or_with_accents_is_identified(clean):
    decisions = clean_decisions(clean, ["Très belle photo !", "Sehr schön!", "これは素晴らしい写真です"])
    assert [(d.reason, d.details["detected"]) for d in decisions] == [("wrong_language", "fr"), ("wrong_language", "de"),
                                                                       ("wrong_language", "ja")]


def test_language_identification_can_be_turned_off():
    decisions = clean_decisions(inf.CommentClean({"language": ""}), NON_ENGLISH)
    assert [d.outcome for d in decisions] == [KEEP] * 4


def test_an_unknown_language_code_is_refused_when_the_step_is_built():
    with pytest.raises(ValueError, match="xx"):
        inf.CommentClean({"language": "xx"})


# --- The fitted statistics ---------------------------------------------------------------------------

def test_the_vocabularies_hold_nouns_and_descriptor_object_bigrams_without_stop_words(corpus_items):
    u, b = inf.ngrams(corpus_items[CORPUS.index(FIGURE_2[3])].doc)
    assert u == ["post", "processing", "water", "half", "photo"]
    assert {"post processing", "top half"} <= set(b)  # the paper's examples of descriptor-object bigrams
    u, b = inf.ngrams(items_for_texts(["Negative space on the left, great lighting."], POS)[0].doc)
    assert "negative space" in b and "great lighting" in b and "space left" in b
    u, b = inf.ngrams(items_for_texts(["Too much empty space at the top."], POS)[0].doc)
    assert "empty space" in b and "space top" in b  # the paper's Topic 84 n-grams


def test_the_state_counts_every_occurrence_and_totals_each_vocabulary(state, corpus_items):
    unigrams, bigrams = inf.counts_from_state(state)
    expected_u = sum(len(inf.ngrams(it.doc)[0]) for it in corpus_items)
    assert state["unigram_total"] == sum(unigrams.values()) == expected_u
    assert state["bigram_total"] == sum(bigrams.values())
    assert state["comments"] == len(CORPUS)
    assert unigrams["shot"] > unigrams["softness"] == 1
    assert bigrams["nice shot"] > bigrams["post processing"] == 1


def test_rho_is_half_the_negative_log_probability_of_the_comments_ngrams(state):
    unigrams, bigrams = inf.counts_from_state(state)
    u_total, b_total = state["unigram_total"], state["bigram_total"]
    [rho] = scores(state, ["Great shot, nice colors!"])
    expected = -0.5 * (math.log(unigrams["shot"] / u_total) + math.log(unigrams["colors"] / u_total)
                       + math.log(bigrams["great shot"] / b_total) + math.log(bigrams["nice colors"] / b_total))
    [doc] = [it.doc for it in items_for_texts(["Great shot, nice colors!"], POS)]
    assert inf.ngrams(doc)[1] == ["great shot", "nice colors"]  # the comma ends a stretch: no "shot nice"
    assert rho == pytest.approx(expected, abs=1e-3)


def test_an_unseen_ngram_counts_as_one_occurrence(state):
    [rho] = scores(state, ["A zeppelin."])
    assert rho == pytest.approx(0.5 * math.log(state["unigram_total"]), abs=1e-3)
    [rho_two] = scores(state, ["A zeppelin."], unseen_count=2.0)
    assert rho_two < rho


def test_squeezed_letter_runs_count_as_one_ngram():
    state = inf.fit_from_texts(["The coloooors are amazing.", "The colooooooooors are amazing."])
    unigrams, _ = inf.counts_from_state(state)
    assert unigrams["coloors"] == 2


# --- Ordering on the fitted corpus ---------------------------------------------------------------------

@pytest.mark.parametrize("frequent, rare", [
    ("Great shot, nice colors!", "the dark rusty tractor contrasts with the golden wheat field"),
    ("Nice shot, great colors.", "the weathered red barn door frames the misty pine forest"),
    ("Great colors, nice composition!", "a lone heron stands in the frozen marsh at dusk"),
])
def test_a_comment_of_frequent_ngrams_scores_lower_than_one_of_rare_descriptor_object_bigrams(state, frequent, rare):
    low, high = scores(state, [frequent, rare])
    assert low < high


def test_the_figure_2_comments_keep_the_papers_order_of_informativeness(state):
    colors, trees, post = scores(state, FIGURE_2[1:])
    assert colors < trees < post


def test_thresholds_keep_the_informative_and_drop_safe_and_overlong_comments(state):
    safe, rare = scores(state, ["Great shot, nice colors!", "the dark rusty tractor contrasts with the golden wheat field"])
    flt = inf.Informativeness({"min_rho": (safe + rare) / 2, "max_rho": rare + 1}, state=state)
    critique = ("comp could be tighter, negative space on the left, color excellent, excellent texture, great "
                "lighting, good dof, great movement, very humorous, ok lines, overall a great attempt")
    decisions = flt.apply(items_for_texts(["Great shot, nice colors!",
                                           "the dark rusty tractor contrasts with the golden wheat field", critique], POS))
    assert [(d.outcome, d.reason) for d in decisions] == [(DROP, "uninformative"), (KEEP, ""), (DROP, "too_subjective")]
    assert {"dark rusty", "rusty tractor", "golden wheat", "wheat field"} <= set(decisions[1].details["bigrams"])
    assert decisions[1].details["unigrams"][:2] == ["tractor", "contrasts"]


def test_the_default_thresholds_keep_the_papers_share_of_the_corpus_and_its_ceiling():
    defaults = inf.Informativeness.defaults
    assert defaults["min_rho_percentile"] == 55 and defaults["min_rho"] is None and defaults["max_rho"] == 120


# --- Saving and loading ---------------------------------------------------------------------------------

def test_the_saved_statistics_load_back_and_give_identical_scores(state):
    texts = FIGURE_2 + TABLE_1_KEPT + ["the dark rusty tractor contrasts with the golden wheat field"]
    data = inf.state_to_bytes(state)
    assert data == json.dumps(state, sort_keys=True, separators=(",", ":")).encode()  # what the executor writes
    loaded = inf.state_from_bytes(data)
    assert loaded == state
    assert scores(loaded, texts) == scores(state, texts)


def test_fitting_from_bare_texts_gives_the_same_statistics_as_fitting_parsed_items(state):
    assert inf.fit_from_texts(CORPUS) == state


def test_the_state_stores_each_count_once(state):
    assert set(state["unigrams"]) == {str(c) for c in set(inf.counts_from_state(state)[0].values())}
    assert state["unigrams"]["1"] == sorted(state["unigrams"]["1"])


def test_statistics_of_another_kind_are_refused():
    with pytest.raises(ValueError, match="informativeness"):
        inf.state_from_bytes(b'{"vocabulary": []}')
    with pytest.raises(ValueError, match="fitted"):
        inf.Informativeness().apply(items_for_texts(["A tree."], POS))


# --- Bad input -------------------------------------------------------------------------------------------

BAD = ["", "😀😀😀🔥🔥", "<script>alert('x')</script>", "<b>nice</b> <img src=x onerror=alert(1)> shot of the bridge",
       NON_ENGLISH[0], "\u200b\u200b", "!!!!!!!!"]


def test_bad_comments_get_decisions_from_both_steps(state, clean):
    items = items_for_texts(BAD, POS)
    for flt in (clean, inf.Informativeness(state=state)):
        decisions = flt.apply(items)
        assert len(decisions) == len(BAD)
        assert all(d.outcome in (KEEP, DROP) for d in decisions)
    assert [d.reason for d in clean.apply(items)][:3] == ["too_short", "too_short", "too_short"]


def test_a_one_megabyte_comment_is_dropped_as_too_long_before_parsing(clean):
    huge = "The light on the old stone bridge is lovely. " * 24000
    assert len(huge) > 1_000_000
    item = Item(caption_id=1, image_id=1, raw_text=huge, text=huge)
    [decision] = clean.apply([item])
    assert (decision.outcome, decision.reason) == (DROP, "too_long")


def test_a_comment_without_a_parse_is_dropped_as_unparsed(state):
    item = Item(caption_id=1, image_id=1, raw_text="x" * 1_100_000, text="x" * 1_100_000, doc=None)
    [decision] = inf.Informativeness(state=state).apply([item])
    assert (decision.outcome, decision.reason) == (DROP, "unparsed")


def test_a_long_parsed_comment_is_scored(state):
    long = "The dark rusty tractor contrasts with the golden wheat field. " * 300
    [decision] = inf.Informativeness(state=state).apply(items_for_texts([long], POS))
    assert (decision.outcome, decision.reason) == (DROP, "too_subjective")
    assert len(decision.details["bigrams"]) == inf.Informativeness.defaults["max_details"]


# --- Images left without comments -----------------------------------------------------------------------

def test_images_whose_comments_were_all_dropped_are_dropped():
    flt = inf.ImagesWithoutComments()
    rows = [{"caption_id": None, "image_id": 7, "captions_alive": 0},
            {"caption_id": None, "image_id": 8, "captions_alive": 3}]
    decisions = flt.decide_run(rows)
    assert list(decisions) == [7] and decisions[7].reason == "no_kept_comment"


def test_image_rows_without_caption_counts_fail_loudly():
    with pytest.raises(ValueError, match="captions_alive"):
        inf.ImagesWithoutComments().decide_run([{"caption_id": None, "image_id": 7}])


def test_the_steps_are_registered_with_what_they_need():
    filters = registry.load_all()
    assert filters["comment_clean"].needs == frozenset() and not filters["comment_clean"].fits
    assert filters["informativeness"].needs == POS and filters["informativeness"].fits
    assert filters["images_without_comments"].run_level and filters["images_without_comments"].target == "image"
    assert filters["comment_clean"].text_only and filters["informativeness"].text_only
