"""The ``markup`` step (issue 24, "Bad input: HTML") on alt-text as the web serves it: tags, entities,
script and style elements, nested, malformed and truncated tags, escaped markup, emoji beside markup, and
plain texts whose "<" or "&" is no markup. Each graded string has its exact cleaned text."""
import pytest

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline
from curation.pipeline import registry
from curation.pipeline.base import DROP, KEEP, Item
from curation.pipeline.presets import PRESETS
from curation.pipeline.text_filters.markup import MAX_TAGS_LISTED

from .release_helpers import executed_run

# (raw alt-text, the text the step hands on)
STRIPPED = [
    ("<b>Sunset</b> over the bay &amp; harbour", "Sunset over the bay & harbour"),
    ("Dog&nbsp;running on the beach", "Dog running on the beach"),
    ("<p>Two kids</p><br/>playing in the park", "Two kids playing in the park"),
    ('<a href="https://example.com/photo/123">A red tram</a> passes the cathedral', "A red tram passes the cathedral"),
    ("<script>alert(1)</script>A cat sleeps on the windowsill", "A cat sleeps on the windowsill"),
    ("<style>.caption{color:red}</style>Red car parked on the street", "Red car parked on the street"),
    ('<img src="x" onerror="alert(1)">A dog on the <i>beach</i>', "A dog on the beach"),
    ("<div><p>A <b><i>lighthouse</b></i> on the rocks</div>", "A lighthouse on the rocks"),  # badly nested
    ("<b>A fisherman repairs his nets", "A fisherman repairs his nets"),  # never closed
    ('A boat on the lake <a href="http://exa', "A boat on the lake"),  # alt-text cut inside a tag
    ("A wooden boat on the shore</p", "A wooden boat on the shore"),
    ("&lt;b&gt;Fresh bread&lt;/b&gt; on a table", "Fresh bread on a table"),  # escaped markup
    ("Caf&eacute; terrace at night", "Café terrace at night"),
    ("Rock &#38; roll band on stage", "Rock & roll band on stage"),
    ("&#x1F436; A puppy on the grass", "🐶 A puppy on the grass"),
    ("A <b>happy</b> dog 🐶 running on the <i>beach</i> 🌊", "A happy dog 🐶 running on the beach 🌊"),
    ("Sun<b>set</b> over the harbour", "Sunset over the harbour"),  # inline tags join
    ("<p>A\n  big\tdog</p>\n\n<p>on a sofa</p>", "A big dog on a sofa"),
    ("<!-- thumbnail -->A lighthouse at dusk", "A lighthouse at dusk"),
    ("<!DOCTYPE html><html><body>Snow on the roofs</body></html>", "Snow on the roofs"),
    ("<o:p>Ducks swim on the pond</o:p>", "Ducks swim on the pond"),  # a word processor's export
    ("3 &lt; 5 apples in a bowl", "3 < 5 apples in a bowl"),
    ("Photo of <unk> on a <b>bench</b>", "Photo of <unk> on a bench"),  # <unk> is no HTML element
    ("A cake with a <3 on it, <em>yummy</em>", "A cake with a <3 on it, yummy"),
    ("<ul><li>Apples</li><li>Pears</li></ul>", "Apples Pears"),
    ("&quot;The Kiss&quot; by Klimt in the museum", '"The Kiss" by Klimt in the museum'),
    ("<SPAN CLASS='x'>Upper-case tags</SPAN> on a sign", "Upper-case tags on a sign"),
    ("A tram<br>in the snow", "A tram in the snow"),
    ("<table><tr><td>Harbour</td><td>at night</td></tr></table>", "Harbour at night"),
]

# Nothing but markup: empty once stripped.
MARKUP_ONLY = ["<img src=x onerror=alert(1)>", "<script>document.write('<b>x</b>')</script>", "<p>&nbsp;</p>",
               "<br/><div></div>", "<!-- -->"]

# A "<" or "&" that is no markup: handed on exactly as it came.
NOT_MARKUP = [
    "3 < 5 apples on a plate",
    "a <3 heart drawn in the sand",
    "i <3 NY t-shirt on a hanger",
    "AT&T store on the corner",
    "Fish & chips at the harbour",
    "Fish &chips at the harbour",
    "R&D lab with microscopes",
    "x<y and y>z written on a blackboard",
    "Temperature <= 5 degrees on a thermometer",
    "Photo of <unk> at the beach",
    "A happy dog 🐶 running on the beach",
    "A   lighthouse\ton the rocks",  # whitespace is not this step's to close up
]

SENTENCE = "A dog runs on the beach near the old harbour & pier."
ONE_MB_REPEATS = 1024 * 1024 // 71 + 1
ONE_MB = "<p>A dog runs on the <b>beach</b> near the old harbour &amp; pier.</p>\n" * ONE_MB_REPEATS


def decide(texts, **params):
    items = [Item(caption_id=i, image_id=i, raw_text=t, text=t) for i, t in enumerate(texts)]
    return registry.get("markup")(params or None).apply(items)


@pytest.mark.parametrize("raw, cleaned", STRIPPED)
def test_markup_is_stripped_and_the_cleaned_text_handed_on(raw, cleaned):
    [decision] = decide([raw])
    assert (decision.outcome, decision.reason, decision.text) == (KEEP, "markup_stripped", cleaned)


@pytest.mark.parametrize("text", NOT_MARKUP)
def test_text_whose_angle_brackets_and_ampersands_are_no_markup_goes_on_unchanged(text):
    [decision] = decide([text])
    assert (decision.outcome, decision.reason, decision.text) == (KEEP, "no_markup", None)


@pytest.mark.parametrize("text", MARKUP_ONLY)
@pytest.mark.parametrize("mode", ["strip", "drop"])
def test_a_caption_that_is_only_markup_is_dropped_in_either_mode(text, mode):
    [decision] = decide([text], mode=mode)
    assert (decision.outcome, decision.reason, decision.text) == (DROP, "markup_only", None)


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_and_whitespace_only_captions_are_dropped_as_empty(text):
    [decision] = decide([text])
    assert (decision.outcome, decision.reason) == (DROP, "empty")


def test_drop_mode_drops_every_caption_with_markup_and_keeps_the_rest():
    decisions = decide([raw for raw, _ in STRIPPED] + NOT_MARKUP, mode="drop")
    assert [(d.outcome, d.reason) for d in decisions] == \
        [(DROP, "markup")] * len(STRIPPED) + [(KEEP, "no_markup")] * len(NOT_MARKUP)
    assert all(d.text is None for d in decisions)


def test_the_details_list_a_few_distinct_tags_and_count_the_entities():
    [first, nested] = decide(["<b>Sunset</b> over the bay &amp; harbour &copy; Ann",
                              "<div><p><b><i><u><span><em>A kite</em></span></u></i></b></p></div>"])
    assert first.details == {"tags": ["b"], "entities": 2}
    assert nested.details == {"tags": ["div", "p", "b", "i", "u"], "entities": 0}
    assert len(nested.details["tags"]) == MAX_TAGS_LISTED


def test_a_one_megabyte_caption_with_markup_is_stripped_whole():
    [decision] = decide([ONE_MB])
    assert len(ONE_MB) > 1024 * 1024
    assert decision.reason == "markup_stripped"
    assert decision.text == " ".join([SENTENCE] * ONE_MB_REPEATS)
    assert decision.details == {"tags": ["p", "b"], "entities": ONE_MB_REPEATS}


def test_duplicate_texts_in_a_batch_get_equal_but_separate_decisions():
    first, second = decide(["<i>A kite</i> on the beach"] * 2)
    assert (first.reason, first.text, first.details) == (second.reason, second.text, second.details)
    assert first.details is not second.details


def test_the_step_is_a_registered_transform_that_judges_the_text_alone_and_checks_its_mode():
    cls = registry.get("markup")
    assert cls.is_transform and cls.text_only and not cls.needs
    assert cls.defaults == {"mode": "strip"} and cls.label and cls.description
    with pytest.raises(ValueError, match="markup: mode must be 'strip' or 'drop', not 'remove'"):
        cls({"mode": "remove"})
    with pytest.raises(ValueError, match="unknown parameter"):
        cls({"tags": ["b"]})


def test_the_conceptual_captions_presets_strip_markup_before_any_other_text_step():
    known = registry.load_all()
    for name in ("conceptual-captions", "conceptual-captions-lowercase"):
        caption_steps = [s["filter"] for s in PRESETS[name]["steps"] if known[s["filter"]].target == "caption"]
        assert caption_steps[:2] == ["markup", "boilerplate_drop"], name
        assert next(s for s in PRESETS[name]["steps"] if s["filter"] == "markup").get("params", {}) == {}


# --- Through the executor ------------------------------------------------------------------------

RUN_CAPTIONS = {
    "sunset": "<b>Sunset</b> over the bay &amp; harbour",
    "sunset_again": "<b>Sunset</b> over the bay &amp; harbour",  # web alt-text repeats itself
    "tram": "<p>A tram in the old town of Lisbon</p> - Stock Photo",
    "dog": "A <b>happy</b> dog 🐶 running on the <i>beach</i>",
    "xss": "<img src=x onerror=alert(1)>",
    "apples": "3 < 5 apples on a plate",
    "empty": "",
}


@pytest.fixture
def run(db, monkeypatch):
    """Ines's scrape of alt-text with its markup, through markup, crop, emoji (strip) and length."""
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 3)  # several chunks, as a pool gets them
    collection = Collection.objects.create(name="Scrape with markup", language="en")
    for i, (key, text) in enumerate(RUN_CAPTIONS.items()):
        image = Image.objects.create(collection=collection, external_id=key, width=800, height=600, format="JPEG",
                                     sha256=f"{i:064x}", status="ready")
        Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT, source="scrape.tsv")
    return executed_run(collection, [
        {"filter": "markup"}, {"filter": "boilerplate_crop"}, {"filter": "emoji", "params": {"mode": "strip"}},
        {"filter": "caption_length"}], name="markup first")


def _final_texts(run) -> dict[str, str | None]:
    """Each image's caption as the run hands it on (the newest transform's), None where dropped."""
    out = {}
    raw = Caption.objects.filter(image__collection=run.collection, parent__isnull=True).select_related("image")
    for caption in raw:
        if FilterDecision.objects.filter(run=run, caption=caption, outcome=DROP).exists():
            out[caption.image.external_id] = None
            continue
        children = Caption.objects.filter(image=caption.image, origin="transformed").order_by("pk")
        out[caption.image.external_id] = children.last().text if children else caption.text
    return out


def test_a_run_strips_markup_before_the_other_steps_read_the_text(run):
    assert run.status == FilterRun.Status.DONE, run.error
    assert run.chunks_failed == 0
    assert _final_texts(run) == {
        "sunset": "Sunset over the bay & harbour", "sunset_again": "Sunset over the bay & harbour",
        "tram": "A tram in the old town of Lisbon", "dog": "A happy dog running on the beach",
        "xss": None, "apples": "3 < 5 apples on a plate", "empty": None}
    at_markup = FilterDecision.objects.filter(run=run, step=0)
    reasons = dict(at_markup.values_list("caption__image__external_id", "reason"))
    assert reasons == {"sunset": "markup_stripped", "sunset_again": "markup_stripped", "tram": "markup_stripped",
                       "dog": "markup_stripped", "xss": "markup_only", "apples": "no_markup", "empty": "empty"}


def test_each_transform_of_a_run_is_a_child_caption_whose_lineage_ends_at_the_raw_alt_text(run):
    tram = Caption.objects.filter(image__external_id="tram", origin="transformed").order_by("pk")
    assert [(c.text, c.metadata["filter"]) for c in tram] == [
        ("A tram in the old town of Lisbon - Stock Photo", "markup"),
        ("A tram in the old town of Lisbon", "boilerplate_crop")]
    assert [c.text for c in tram.last().lineage()] == [
        "A tram in the old town of Lisbon", "A tram in the old town of Lisbon - Stock Photo",
        RUN_CAPTIONS["tram"]]
    assert not Caption.objects.filter(image__external_id__in=["apples", "xss"], origin="transformed").exists()
    funnel = {row["filter"]: row for row in run.funnel}
    assert (funnel["markup"]["entered"], funnel["markup"]["dropped"]) == (len(RUN_CAPTIONS), 2)


def test_the_filter_catalogue_of_the_api_lists_the_markup_step(alice):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(alice)
    body = api.get("/api/pipelines/filters/").json()
    [entry] = [f for f in body if f["name"] == "markup"]
    assert entry["transform"] is True and entry["target"] == "caption"
    assert entry["defaults"] == {"mode": "strip"} and entry["needs"] == []


@pytest.mark.django_db
def test_pipelines_made_from_the_preset_before_the_step_existed_get_it_before_the_first_text_rule():
    import importlib

    from django.apps import apps

    migration = importlib.import_module("curation.migrations.0012_cc_preset_markup")
    old = [{"filter": "image_format"}, {"filter": "near_duplicate"}, {"filter": "boilerplate_drop"},
           {"filter": "caption_length"}]
    made = Pipeline.objects.create(name="cc from last year", preset="conceptual-captions", steps=old)
    changed_by_hand = Pipeline.objects.create(name="cc without boilerplate", preset="conceptual-captions",
                                              steps=[{"filter": "caption_length"}])
    mine = Pipeline.objects.create(name="my own", steps=old)
    migration.add_markup(apps, None)
    made.refresh_from_db(), changed_by_hand.refresh_from_db(), mine.refresh_from_db()
    assert [s["filter"] for s in made.steps] == ["image_format", "near_duplicate", "markup", "boilerplate_drop",
                                                 "caption_length"]
    assert changed_by_hand.steps == [{"filter": "caption_length"}] and mine.steps == old
    migration.add_markup(apps, None)  # twice: once
    made.refresh_from_db()
    assert [s["filter"] for s in made.steps].count("markup") == 1
