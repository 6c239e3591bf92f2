"""Seed 004's fluency-guided strategies, checked exactly (weighted loss) and statistically (rejection sampling)."""
from __future__ import annotations

import math

import pytest
import torch

from modeling.captioning import strategies
from modeling.captioning.decoders import sentence_nll
from modeling.trainers import get_trainer


def test_rejection_sampling_includes_f_below_half_with_probability_2f_and_always_above():
    g = torch.Generator().manual_seed(7)
    draws = 20000
    for f in (0.05, 0.2, 0.35, 0.45):
        fluency = torch.full((draws,), f)
        included = int(strategies.rejection_mask(fluency, g).sum())
        p = 2 * f
        sd = math.sqrt(draws * p * (1 - p))
        assert abs(included - draws * p) < 4 * sd, (f, included / draws)
    for f in (0.5, 0.51, 0.9, 1.0):
        assert bool(strategies.rejection_mask(torch.full((5000,), f), g).all())
    assert not strategies.rejection_mask(torch.zeros(5000), g).any()  # f = 0 never beats u


def test_fluency_only_and_all_masks():
    fluency = torch.tensor([0.1, 0.5, 0.51, 0.9])
    assert strategies.keep_mask(fluency, "fluency_only").tolist() == [False, False, True, True]
    assert strategies.keep_mask(fluency, "all").all() and strategies.keep_mask(fluency, "weighted_loss").all()
    with pytest.raises(ValueError):
        strategies.keep_mask(fluency, "nope")


def test_weighted_loss_equals_the_hand_computed_value():
    # vocabulary of 3 (0 pad, 1 start, 2 end) + 2 words; two captions: [start, 3, end] and [start, 4, 3, end]
    tokens = torch.tensor([[1, 3, 2, 0], [1, 4, 3, 2]])
    logits = torch.zeros(2, 3, 5)
    logits[0, 0, 3] = math.log(4.0)  # p(3) = 4 / (4 + 4) = 0.5 with the other four at exp(0) = 1
    logits[1, 1, 3] = math.log(2.0)  # p(3) = 2 / 6
    nll = sentence_nll(logits, tokens)
    # caption 0: -log 0.5 - log(1/5) (pad step ignored); caption 1: -log(1/5) - log(2/6) - log(1/5)
    by_hand = [-math.log(0.5) - math.log(1 / 5), -math.log(1 / 5) - math.log(2 / 6) - math.log(1 / 5)]
    assert nll.tolist() == pytest.approx(by_hand, abs=1e-5)
    fluency = torch.tensor([0.3, 0.8])  # mu = 0.3 (not fluent), 1 (fluent)
    expected = (0.3 * by_hand[0] + 1.0 * by_hand[1]) / 2
    assert float(strategies.weighted_loss(nll, fluency)) == pytest.approx(expected, abs=1e-5)
    assert float(strategies.batch_loss(nll, fluency, "all")) == pytest.approx(sum(by_hand) / 2, abs=1e-5)
    assert [strategies.fluency_weight(f) for f in (0.2, 0.5, 0.50001, 1.0)] == [0.2, 0.5, 1.0, 1.0]


def test_trainer_batches_apply_the_strategy_per_epoch():
    trainer = get_trainer("captioner-lstm")
    n = 400
    split = {"images": torch.zeros(1, 3, 4, 4, dtype=torch.uint8), "img": torch.zeros(n, dtype=torch.long),
             "tokens": torch.ones(n, 4, dtype=torch.long), "fluency": torch.tensor([0.25] * 200 + [0.75] * 200)}
    config = {"batch_size": 1000, "strategy": "rejection_sampling"}
    g = torch.Generator().manual_seed(3)
    sizes = []
    for epoch in range(20):
        (batch,) = list(trainer.batches(split, config, epoch, g, True))
        assert int((batch["fluency"] == 0.75).sum()) == 200  # fluent captions always enter
        sizes.append(int((batch["fluency"] == 0.25).sum()))
    mean = sum(sizes) / len(sizes)
    assert abs(mean - 100) < 4 * math.sqrt(200 * 0.25) / math.sqrt(20) * 2 and len(set(sizes)) > 1
    (batch,) = list(trainer.batches(split, dict(config, strategy="fluency_only"), 0, g, True))
    assert batch["fluency"].min() == 0.75 and len(batch["fluency"]) == 200
    (batch,) = list(trainer.batches(split, config, 0, g, False))  # evaluation sees everything
    assert len(batch["fluency"]) == n
