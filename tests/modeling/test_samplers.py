"""The learning loop's samplers: random, uncertainty (margin) and the cold-start-safe hybrid, on their own
and on a planted pool retrained each round with the platform's own trainer."""
import numpy as np
import pytest

from modeling.engine import fit_in_memory
from modeling.evaluation import binary_report
from modeling.loop import samplers
from modeling.threads import torch_threads
from modeling.trainers import get_trainer


def test_each_sampler_orders_every_item_once():
    probs = np.random.default_rng(0).random(500)
    for name in samplers.SAMPLERS:
        order = samplers.order(probs, name, seed=1, batch_size=40, labels_so_far=200)
        assert sorted(order.tolist()) == list(range(500)), name
        priorities = samplers.priorities(probs, name, seed=1, batch_size=40, labels_so_far=200)
        assert priorities[order[0]] == 0 and priorities[order[-1]] == 499
    with pytest.raises(ValueError):
        samplers.order(probs, "greedy")


def test_uncertainty_serves_the_smallest_margin_first():
    probs = np.array([0.99, 0.51, 0.1, 0.45, 0.7, 0.02])
    assert samplers.order(probs, "uncertainty").tolist()[:3] == [1, 3, 4]


def test_a_hybrid_batch_mixes_representative_picks_with_the_most_uncertain_and_half_random_at_cold_start(
        monkeypatch):
    rng = np.random.default_rng(3)
    centres = rng.normal(scale=10.0, size=(4, 8))
    features = np.concatenate([c + rng.normal(size=(200, 8)) for c in centres])  # four planted clusters
    cluster = np.repeat(np.arange(4), 200)
    probs = rng.uniform(0.0, 1.0, 800)
    first = samplers.order(probs, "hybrid", seed=5, batch_size=40, random_share=0.25, labels_so_far=200,
                           features=features)[:40]
    by_margin = np.argsort(samplers.margins(probs))
    assert len(set(first) & set(by_margin[:40].tolist())) >= 30  # three quarters: the most uncertain
    representative = [i for i in first if i not in set(by_margin[:30].tolist())]
    assert len(set(cluster[representative])) == 4  # a quarter from the centres of the pool: every cluster
    cold = samplers.order(probs, "hybrid", seed=5, batch_size=40, random_share=0.25, labels_so_far=40,
                          features=features)[:40]
    assert len(set(cold) & set(by_margin[:40].tolist())) < 10  # few labels: margins are not trusted yet
    # Half the cold batch at the centres (every cluster), half a random draw the model does not steer.
    assert len(set(cluster[cold[:20]].tolist())) == 4
    assert min(np.bincount(cluster[cold], minlength=4)) >= 5
    monkeypatch.setattr(samplers, "COLD_START", "random")  # the measured alternatives stay available
    random_cold = samplers.order(probs, "hybrid", seed=5, batch_size=40, random_share=0.25, labels_so_far=40,
                                 features=features)[:40]
    assert samplers.order(probs[::-1], "hybrid", seed=5, batch_size=40, random_share=0.25, labels_so_far=40)[:40] \
        .tolist() == random_cold.tolist()  # all random: neither the features nor the scores steer it
    monkeypatch.setattr(samplers, "COLD_START", "representative")
    all_centres = samplers.order(probs, "hybrid", seed=5, batch_size=40, random_share=0.25, labels_so_far=40,
                                 features=features)[:40]
    assert min(np.bincount(cluster[all_centres], minlength=4)) >= 8  # about 10 from each planted cluster
    monkeypatch.setattr(samplers, "COLD_START", "mixed")
    # Without features (a trainer that has none) later batches and every batch mix a random share.
    plain = samplers.order(probs, "hybrid", seed=5, batch_size=40, random_share=0.25, labels_so_far=200)[:40]
    assert len(set(plain) & set(by_margin[:30].tolist())) == 30


def _planted_pool(seed: int, n: int = 1400, dim: int = 20):
    """Two classes (60/40) separated along a planted direction, with a band of hard items near the
    boundary and label noise of 5%: the shape of a fluency pool seen through a sentence encoder."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=dim)
    direction /= np.linalg.norm(direction)
    x = rng.normal(size=(n, dim))
    margin = x @ direction
    y = (margin > np.quantile(margin, 0.4)).astype(int)
    flip = rng.random(n) < 0.05
    y[flip] = 1 - y[flip]
    return x.astype(np.float32), y


def _curve(x, y, arm: str, seed: int, rounds: int = 6, start: int = 40, step: int = 40):
    trainer = get_trainer("fluency-encoder")
    config = trainer.config({"epochs": 100})
    pool, test = np.arange(1000), np.arange(1000, len(y))
    labelled = list(np.random.default_rng(seed).choice(pool, start, replace=False))
    curve = []
    for number in range(rounds + 1):
        model = fit_in_memory(trainer, trainer.prepared_from_features(x[labelled], y[labelled].tolist(), config),
                              config)
        curve.append(binary_report(y[test].tolist(), trainer.predict_features(model, x[test]))["macro_f1"])
        if number == rounds:
            return curve
        rest = np.setdiff1d(pool, labelled)
        probs = np.asarray(trainer.predict_features(model, x[rest]))
        features = trainer.sampler_features(model, x[rest])
        labelled += list(rest[samplers.order(probs, arm, seed=seed * 100 + number, batch_size=step,
                                             labels_so_far=len(labelled), features=features)[:step]])


def test_the_hybrid_never_falls_below_random_by_more_than_a_small_margin_and_uncertainty_is_there_to_compare():
    curves = {arm: [] for arm in ("hybrid", "random", "uncertainty")}
    with torch_threads(1):
        for seed in range(3):
            x, y = _planted_pool(seed)
            for arm in curves:
                curves[arm].append(_curve(x, y, arm, seed))
    mean = {arm: np.mean(c, axis=0) for arm, c in curves.items()}
    gap = mean["hybrid"] - mean["random"]
    assert gap.min() >= -0.02, (mean["hybrid"].round(3), mean["random"].round(3))
    assert mean["hybrid"][-1] > mean["random"][-1]  # and it ends ahead: the labels went where they help
    assert not np.allclose(mean["uncertainty"], mean["random"])  # a different arm, run the same way
