"""A lab's first collection through the Conceptual Captions presets: 30 photographs whose alt-text was
written in lower case (a social site's, scraped with the thumbnails), as issue 24 found it.

The paper's capitalisation rule drops every such caption; the lower-case variant of the preset keeps the
good ones. The photographs are drawn here (noise with shapes, 640x480 JPEG, each different enough that the
near-duplicate step keeps them apart).
"""
import io
import random

import pytest
from PIL import Image as PILImage
from PIL import ImageDraw

from curation.models import Caption, Collection, FilterRun, Image

from .test_presets import run_preset

pytestmark = pytest.mark.django_db

LOWER_CASE_ALT_TEXT = [
    "a man walks his dog along the river at dusk",
    "two children play with a kite on the beach",
    "a red tram passes the cathedral in the old town",
    "fresh bread on a wooden table in a small bakery",
    "a fisherman repairs his nets at the harbour in the morning",
    "an old woman feeds pigeons in the square",
    "a cyclist climbs the mountain road above the village",
    "a bowl of soup with bread on the kitchen table",
    "a cat sleeps on the windowsill in the afternoon sun",
    "students walk across the campus in the autumn",
    "a farmer drives a tractor through the wheat field",
    "a wooden boat on the shore of a quiet lake",
    "a girl reads a book under a tree in the park",
    "a busy market street with fruit stalls in the city",
    "a lighthouse on the rocks at the edge of the sea",
    "a happy dog 🐶 running on the beach with a ball",
    "snow covers the roofs of the houses in the valley",
    "a chef prepares pasta in the kitchen of a restaurant",
    "a train crosses the bridge over the river",
    "a couple sits on a bench in the garden at sunset",
    "rain falls on the street in front of the station",
    "a horse grazes in the meadow near the farm",
    "people wait for the bus at the stop in the rain",
    "a vase of flowers on the table by the window",
    "a boy rides his bike along the path in the forest",
    "the skyline of the city at night from the hill",
    "a potter shapes a bowl on the wheel in the workshop",
    "a small church on the hill above the sea",
    "ducks swim on the pond in the park in the morning",
    "a woman carries a basket of apples from the orchard",
]


def _photo(seed: int) -> bytes:
    rng = random.Random(seed)
    picture = PILImage.effect_noise((640, 480), 60 + seed % 40).convert("RGB")
    draw = ImageDraw.Draw(picture)
    for _ in range(12):
        x, y = rng.randrange(600), rng.randrange(440)
        colour = tuple(rng.randrange(256) for _ in range(3))
        draw.rectangle((x, y, x + rng.randrange(40, 240), y + rng.randrange(40, 200)), fill=colour)
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


@pytest.fixture
def lower_case_collection(db):
    from curation.ingest.images import store_image_file, verify_image

    collection = Collection.objects.create(name="social alt-text, lower case")
    for index, text in enumerate(LOWER_CASE_ALT_TEXT):
        image = Image(collection=collection, external_id=f"lc{index}")
        store_image_file(image, verify_image(_photo(index)))
        image.save()
        Caption.objects.create(image=image, text=text, origin="alt_text")
    return collection


def _funnel(run) -> dict[str, dict]:
    """The funnel's rows by filter, with "left": what went on to the next step (kept or not applicable)."""
    return {row["filter"]: {**row, "left": row["kept"] + row["not_applicable"]} for row in run.funnel}


def test_the_papers_capitalisation_drops_every_lower_case_caption(lower_case_collection):
    run = run_preset(lower_case_collection, "conceptual-captions")
    assert run.status == FilterRun.Status.DONE, run.error
    funnel = _funnel(run)
    assert funnel["image_format"]["entered"] == 30 and funnel["near_duplicate"]["left"] == 30
    capitalisation = funnel["capitalisation"]
    assert capitalisation["entered"] > 0 and capitalisation["left"] == 0
    if "warning" in capitalisation:  # the funnel's warning (issue 24: a step that leaves nothing)
        assert capitalisation["warning"]


def test_the_lower_case_preset_keeps_the_good_lower_case_captions(lower_case_collection):
    run = run_preset(lower_case_collection, "conceptual-captions-lowercase")
    assert run.status == FilterRun.Status.DONE, run.error
    funnel = _funnel(run)
    assert funnel["capitalisation"]["left"] >= 20, funnel["capitalisation"]
    assert funnel["emoji"]["left"] == funnel["emoji"]["entered"]  # stripped, not dropped
    stripped = Caption.objects.filter(image__collection=lower_case_collection, source__contains="emoji")
    assert [c.text for c in stripped] == ["a happy dog running on the beach with a ball"]
    assert funnel[run.funnel[-1]["filter"]]["left"] > 0, run.funnel
    assert not funnel["capitalisation"].get("warning")


@pytest.fixture
def first_critiques(db):
    """Twenty images with five comments each (critiques and safe comments of a photography site)."""
    from .comment_corpus import corpus

    collection = Collection.objects.create(name="first critiques")
    comments = corpus(100, seed=11)
    for index in range(20):
        image = Image.objects.create(collection=collection, external_id=f"ava{index}", status="missing")
        for text in dict.fromkeys(comments[index * 5:(index + 1) * 5]):  # an image's comments are distinct
            Caption.objects.create(image=image, text=text, origin="web_comment")
    return collection, comments


def test_the_papers_absolute_numbers_find_no_topics_on_a_first_collection(first_critiques):
    from curation.models import FilterDecision

    collection, _ = first_critiques
    run = run_preset(collection, "ava-captions", informativeness={"min_rho_percentile": None, "min_rho": 20},
                     lda_topics={"adapt_bounds": False})
    assert run.status == FilterRun.Status.DONE, run.error
    reasons = set(FilterDecision.objects.filter(run=run, filter_name="lda_topics").values_list("reason", flat=True))
    assert reasons <= {"no_vocabulary"}


def test_the_ava_preset_with_its_defaults_keeps_critiques_and_labels_topics_on_a_first_collection(first_critiques):
    """The defaults, relative to the collection, keep the critiques and find topics."""
    from curation.models import FilterDecision, ImageTopics

    collection, comments = first_critiques
    run = run_preset(collection, "ava-captions")
    assert run.status == FilterRun.Status.DONE, run.error
    decisions = FilterDecision.objects.filter(run=run, filter_name="informativeness")
    kept = set(decisions.filter(outcome="keep").values_list("caption__text", flat=True))
    critiques = {t for t in comments if len(t.split()) > 8}
    assert len(kept & critiques) >= 0.8 * len(critiques & set(decisions.values_list("caption__text", flat=True)))
    topics = FilterDecision.objects.filter(run=run, filter_name="lda_topics")
    assert not topics.filter(reason="no_vocabulary").exists()
    assert ImageTopics.objects.filter(image__collection=collection).exists()
