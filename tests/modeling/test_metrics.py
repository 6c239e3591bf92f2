"""The metric wrapper against pycocoevalcap's own scorers, and diversity on a hand-checkable set."""
from __future__ import annotations

import shutil

import pytest

from modeling.captioning.metrics import SPICE_SKIPPED, caption_metrics, diversity

REFS = {
    "a": ["a man riding a horse on the beach", "a person rides a horse along the sea shore"],
    "b": ["actors attend the premiere at festival", "two actors at a film premiere"],
}
CANDS = {"a": "a man riding a horse on a beach", "b": "actors attend the film premiere"}


def coco_inputs():
    return ({k: [r.lower() for r in v] for k, v in REFS.items()}, {k: [v] for k, v in CANDS.items()})


def test_wrapper_matches_pycocoevalcap_bleu_rouge_cider():
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts, res = coco_inputs()
    ours = caption_metrics(REFS, CANDS, meteor=False)
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    assert [ours[f"BLEU-{n}"] for n in range(1, 5)] == pytest.approx(bleu, abs=1e-12)
    assert ours["ROUGE-L"] == pytest.approx(Rouge().compute_score(gts, res)[0], abs=1e-12)
    assert ours["CIDEr"] == pytest.approx(Cider().compute_score(gts, res)[0], abs=1e-12)
    assert 0.5 < ours["BLEU-1"] <= 1 and ours["BLEU-4"] < ours["BLEU-1"]
    assert SPICE_SKIPPED in ours["skipped"] and "METEOR left out by the config" in ours["skipped"]
    # an identical candidate gets BLEU-1 of 1
    assert caption_metrics({"x": ["a red square"]}, {"x": "a red square"}, meteor=False)["BLEU-1"] == pytest.approx(1.0)


@pytest.mark.skipif(not shutil.which("java"), reason="METEOR needs Java, which this machine lacks")
def test_wrapper_matches_pycocoevalcap_meteor():
    from pycocoevalcap.meteor.meteor import Meteor

    gts, res = coco_inputs()
    ours = caption_metrics(REFS, CANDS)
    scorer = Meteor()
    theirs = scorer.compute_score(gts, res)[0]
    assert ours["METEOR"] == pytest.approx(theirs, abs=1e-9) and 0 < theirs < 1


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="same ids"):
        caption_metrics({"a": ["x"]}, {"b": "x"}, meteor=False)
    with pytest.raises(ValueError, match="no reference"):
        caption_metrics({"a": []}, {"a": "x"}, meteor=False)


def test_diversity_on_a_hand_checkable_set():
    caps = ["a red square", "a red circle", "a red square", "the blue sky"]
    d = diversity(caps, positions=4)
    assert d["vocabulary"] == 7  # a red square circle the blue sky
    assert d["unique_captions"] == 3 / 4
    assert d["ngrams"]["1"] == 7 and d["distinct_n"]["1"] == 7 / 12
    assert d["ngrams"]["2"] == 5  # a red, red square, red circle, the blue, blue sky
    assert d["distinct_n"]["2"] == 5 / 8
    assert d["ngrams"]["3"] == 3 and d["ngrams"]["4"] == 0 and d["distinct_n"]["4"] == 0.0
    assert d["unique_per_position"] == [2, 2, 3, 0]
