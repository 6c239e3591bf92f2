"""CLIPScore and RefCLIPScore with the tiny CLIP of the model pack: values in range, computed as the
paper defines them from the encoder's own vectors, a candidate equal to its reference, images read
through the embeddings store (and stored there), and a note instead of scores without a CLIP model."""
import numpy as np
import pytest
from PIL import Image as PILImage

import pack
from curation.models import Collection
from modeling.captioning.clipscore import W, clip_scores, harmonic_mean
from pack.models import ImageEmbedding

from ..curation.release_helpers import add_image

pytestmark = pytest.mark.django_db

CANDIDATES = {1: "a red square", 2: "a green field", 3: "a blue sky"}
REFERENCES = {1: ["a red square on white", "red"], 2: ["grass"], 3: []}


def _pil(colour):
    return PILImage.new("RGB", (32, 32), colour)


def test_scores_are_in_range_and_follow_the_definition(tiny_clip):
    images = {1: _pil("red"), 2: _pil("green"), 3: _pil("blue")}
    out = clip_scores(tiny_clip, [1, 2, 3], CANDIDATES, REFERENCES, images=images, per_image=True)
    assert out["clip_model"] == tiny_clip.key and out["n"] == 3 and out["skipped"] == 0
    assert 0.0 <= out["CLIP-S"] <= W and 0.0 <= out["RefCLIP-S"] <= W
    encoder = pack.load(tiny_clip)
    v = encoder.encode_images([images[1]])[0]
    c, refs = encoder.encode_texts([CANDIDATES[1]])[0], encoder.encode_texts(REFERENCES[1])
    one = out["per_image"][1]
    assert one["clip_s"] == pytest.approx(W * max(float(v @ c), 0.0), abs=1e-5)
    assert one["ref_s"] == pytest.approx(max(float(np.max(refs @ c)), 0.0), abs=1e-5)
    assert one["refclip_s"] == pytest.approx(harmonic_mean(one["clip_s"], one["ref_s"]))
    assert "refclip_s" not in out["per_image"][3]  # no references: CLIP-S only
    assert out["RefCLIP-S"] == pytest.approx(np.mean([out["per_image"][i]["refclip_s"] for i in (1, 2)]))


def test_a_candidate_equal_to_its_reference(tiny_clip):
    out = clip_scores(tiny_clip, [1], {1: "a red square"}, {1: ["a red square"]}, images={1: _pil("red")},
                      per_image=True)
    row = out["per_image"][1]
    assert row["ref_s"] == pytest.approx(1.0, abs=1e-5)
    # The harmonic mean with 1 lies between the two: at least the smaller of CLIP-S and 1.
    assert min(row["clip_s"], 1.0) - 1e-6 <= out["RefCLIP-S"] <= max(row["clip_s"], 1.0) + 1e-6


def test_image_pks_go_through_the_embeddings_store(tiny_clip):
    collection = Collection.objects.create(name="squares")
    ids = [add_image(collection, seed=n, external_id=f"sq-{n}").pk for n in range(3)]
    candidates = {ids[0]: "a square", ids[1]: "another square", ids[2]: ""}
    out = clip_scores(tiny_clip, ids, candidates, {ids[0]: ["a square"]})
    assert out["n"] == 2 and out["skipped"] == 1  # the empty caption is not scored
    assert 0.0 <= out["CLIP-S"] <= W and "RefCLIP-S" in out
    assert ImageEmbedding.objects.filter(model=tiny_clip, image_id__in=ids[:2]).count() == 2
    again = clip_scores(tiny_clip, ids, candidates, {ids[0]: ["a square"]})
    assert again["CLIP-S"] == pytest.approx(out["CLIP-S"], abs=1e-6)


def test_without_a_clip_model_there_is_a_note_and_no_score(models_dir, db):
    out = clip_scores(None, [1], {1: "a cat"}, {1: ["a cat"]})
    assert "CLIP-S" not in out and "no CLIP-family model" in out["note"]
