"""Bad input through the real text filters: a collection as a lab scrapes it (empty captions and captions
that are empty once the stock-photo boilerplate is cut, emoji only, HTML, Japanese or Cyrillic beside
English, a 19,000-character paste, and ordinary alt-text) run through every caption step of the
``conceptual-captions`` preset (seed 002, Section 3) by the executor, chunk by chunk as the workers run it.

Nothing crashes, and every caption is accounted for: it has a decision at the first text step, and either
a drop with a reason at the step that dropped it (and no decision after it) or a decision at every step.
The image steps are left out: these images are catalogue rows without files."""
import pytest

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, RunChunk
from curation.pipeline import executor, registry
from curation.pipeline.base import DROP
from curation.pipeline.presets import PRESETS
from curation.services import run_create

pytestmark = pytest.mark.django_db

LONG = ("A long exposure of the harbour at night with fishing boats moored along the quay and the lights of "
        "the old town reflected in the still water. ") * 160  # about 19,000 characters

CAPTIONS = {
    "empty": "",
    "whitespace": "   \t\n  ",
    "stock_only": "Stock Photo - Stock Image",  # nothing left once the boilerplate is cut
    "emoji_only": "🐶❤️🌊🌴☀️",
    "emoji_in_text": "A happy dog 🐶 running on the beach 🌊 with a red ball",
    "html": "<p>A <b>fisherman</b> repairs his nets at the harbour&nbsp;in the morning</p>",
    "html_only": "<br/><div></div>",
    "japanese_english": "東京タワー lit up at night with the city skyline behind it",
    "japanese": "夜の東京タワーと街の明かり",
    "cyrillic_english": "Красная площадь at night with the cathedral in the background",
    "cyrillic": "Собор Василия Блаженного на Красной площади ночью",
    "long": LONG,
    "control_chars": "A cyclist\x1b climbs the\u200b mountain road\u202e above the village",
    "ordinary_1": "A fisherman repairs his nets at the harbour in the morning.",
    "ordinary_2": "Two children play with a kite on a windy beach.",
    "ordinary_3": "A red tram passes the old cathedral in the city centre.",
    "ordinary_4": "Fresh bread on a wooden table in a small bakery.",
}


def caption_steps() -> list[dict]:
    """The preset's steps that judge captions, in the preset's order."""
    known = registry.load_all()
    return [step for step in PRESETS["conceptual-captions"]["steps"] if known[step["filter"]].target == "caption"]


@pytest.fixture
def scraped():
    """Ines's first scrape: one photo per caption, catalogue rows only."""
    collection = Collection.objects.create(name="First scrape", language="en")
    for i, (key, text) in enumerate(CAPTIONS.items()):
        image = Image.objects.create(collection=collection, external_id=key, width=800, height=600, format="JPEG",
                                     sha256=f"{i:064x}", status="ready")
        Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT, source="scrape.tsv")
    return collection


@pytest.fixture
def run(scraped, monkeypatch):
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 5)  # several chunks, as a pool gets them
    pipeline = Pipeline.objects.create(name="cc text steps", steps=caption_steps())
    run = run_create(collection=scraped, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    return run


def decisions_by_caption(run) -> dict[str, list[FilterDecision]]:
    out: dict[str, list[FilterDecision]] = {}
    for d in FilterDecision.objects.filter(run=run, caption__isnull=False).select_related("caption__image") \
            .order_by("step", "pk"):
        out.setdefault(d.caption.image.external_id, []).append(d)
    return out


def test_the_run_finishes_without_a_failed_chunk(run):
    assert len(caption_steps()) >= 12
    assert run.status == FilterRun.Status.DONE, run.error
    assert run.chunks_failed == 0 and not run.error


def test_every_caption_is_decided_and_a_drop_says_why_at_its_step(run):
    steps = len(run.snapshot)
    found = decisions_by_caption(run)
    assert set(found) == set(CAPTIONS), set(CAPTIONS) - set(found)
    for key, decisions in found.items():
        positions = [d.step for d in decisions]
        assert positions[0] == 0, (key, positions)
        assert len(positions) == len(set(positions)), (key, positions)  # one decision per step
        drops = [d for d in decisions if d.outcome == DROP]
        if drops:
            first = drops[0]
            assert first.reason.strip(), (key, first.filter_name)
            assert decisions[-1] == first, (key, [(d.filter_name, d.outcome) for d in decisions])
        else:
            assert positions == list(range(steps)), (key, positions)


@pytest.mark.parametrize("key, expected_step", [
    ("empty", "markup"), ("whitespace", "markup"), ("stock_only", "boilerplate_crop"),
    ("emoji_only", "emoji"), ("emoji_in_text", "emoji"),  # the preset's mode "drop"
    ("long", "caption_length"), ("cyrillic", "language"),
    ("html_only", None), ("japanese", None),  # dropped by whichever rule first finds no words in them
])
def test_captions_with_nothing_usable_are_dropped(run, key, expected_step):
    decisions = decisions_by_caption(run)[key]
    last = decisions[-1]
    assert last.outcome == DROP, (key, [(d.filter_name, d.outcome, d.reason) for d in decisions])
    if expected_step:
        assert last.filter_name == expected_step, (key, last.filter_name, last.reason)


def test_ordinary_captions_come_through_every_step(run):
    found = decisions_by_caption(run)
    for key in (k for k in CAPTIONS if k.startswith("ordinary")):
        assert [d.outcome for d in found[key] if d.outcome == DROP] == [], \
            (key, [(d.filter_name, d.reason) for d in found[key] if d.outcome == DROP])
        assert len(found[key]) == len(run.snapshot)


def test_the_funnel_accounts_for_every_caption(run):
    rows = run.funnel
    assert rows[0]["entered"] == len(CAPTIONS)
    for before, after in zip(rows, rows[1:]):
        assert after["entered"] == before["kept"] + before["not_applicable"], (before, after)
    left = rows[-1]["kept"] + rows[-1]["not_applicable"]
    assert sum(row["dropped"] for row in rows) + left == len(CAPTIONS)
    assert left == len([k for k in CAPTIONS if k.startswith("ordinary")]) + 1  # and "html": markup strips its tags
