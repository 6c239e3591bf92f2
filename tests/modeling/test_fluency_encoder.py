"""The "fluency-encoder" trainer: a head on the packaged sentence encoder that learns from the few hundred
votes a lab collects, evaluated honestly (majority class, cross-validation, verdict), the default for new
fluency runs, with embeddings cached per text."""
import random

import numpy as np
import pytest

from modeling import encoders, engine, registry
from modeling.evaluation import binary_report, majority_baseline
from modeling.fluency import score
from modeling.models import ModelVersion, TrainingRun
from modeling.trainers.base import TrainingError
from pack.models import TextEmbedding
from tests.modeling.loop_helpers import make_pool_campaign, vote


def _train(campaign, user, **config):
    run = engine.create_run("fluency-encoder", {"device": "cpu", **config}, campaign=campaign, user=user)
    return engine.train(run.pk)


def test_with_200_labels_it_beats_the_majority_class_by_015_macro_f1_on_held_out_sentences(
        db, alice, django_user_model):
    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=320, seed=3)
    tasks = sorted(truth)
    train_tasks, held_tasks = tasks[:200], tasks[200:]
    vote(campaign, truth, tasks, raters)
    run = _train(campaign, alice, exclude_tasks=held_tasks, test_fraction=0.2)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert run.data_summary["left_out"] == {"hold-out": 120}
    assert sum(run.data_summary["labels"].values()) == 200
    # Judged on 120 sentences it never saw, against the majority class of its training labels.
    version = run.model_version
    fs = score([campaign.tasks.get(pk=t).caption.text for t in held_tasks], version=version)
    y = [truth[t] for t in held_tasks]
    model = binary_report(y, fs)
    majority = majority_baseline([truth[t] for t in train_tasks], y)
    assert model["macro_f1"] >= majority["macro_f1"] + 0.15, (model["macro_f1"], majority["macro_f1"])
    assert model["confusion"]["tn"] > 0 and model["confusion"]["tp"] > 0  # it says "not fluent" too
    # The run's own evaluation: 5-fold cross-validation under 500 labels, and the verdict.
    metrics = run.metrics
    assert metrics["cv"]["folds"] == 5
    assert metrics["cv"]["model"]["macro_f1"]["mean"] > metrics["cv"]["majority"]["macro_f1"]["mean"] + 0.15
    assert metrics["verdict"]["beats_majority"] is True and metrics["verdict"]["basis"] == "cv"
    assert set(metrics["report"]["classes"]) == {"0", "1"} and "ece" in metrics["report"]
    assert run.data_summary["encoder"]["name"] == "minilm-l6-v2"
    assert "Apache-2.0" in run.data_summary["encoder"]["licence"]
    registry.activate(version)  # a version that beats majority activates without force


def test_labels_that_carry_no_signal_give_a_version_flagged_does_not_beat_majority(db, alice, django_user_model):
    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=160, seed=4, name="noise fluency")
    rng = random.Random(0)
    noise = {t: int(rng.random() < 0.7) for t in truth}  # labels independent of the sentences
    vote(campaign, noise, sorted(noise), raters)
    run = _train(campaign, alice)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert run.metrics["verdict"]["beats_majority"] is False, run.metrics["verdict"]
    version = run.model_version
    with pytest.raises(TrainingError) as refused:
        registry.activate(version)
    assert refused.value.code == "does_not_beat_majority"
    assert not ModelVersion.objects.filter(active=True).exists()


def test_embeddings_are_cached_per_text_and_scoring_reuses_them(db, alice, django_user_model):
    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=60, seed=5, name="cache fluency")
    vote(campaign, truth, sorted(truth), raters)
    run = _train(campaign, alice, cv_folds=0)
    assert run.status == TrainingRun.Status.DONE, run.error
    key = encoders.cache_key(encoders.spec_of())
    cached = TextEmbedding.objects.filter(encoder=key).count()
    assert cached == 60  # every distinct sentence once
    texts = list(campaign.tasks.values_list("caption__text", flat=True)[:10])
    first = score(texts + ["a brand new sentence about a red kite over the hill"], version=run.model_version)
    assert TextEmbedding.objects.filter(encoder=key).count() == 61
    vectors = encoders.embed(texts)
    assert vectors.shape == (10, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert score(texts, version=run.model_version) == first[:10]


def test_new_loops_default_to_the_encoder_trainer_and_the_seed_model_stays_one_option_away():
    from modeling.loop.services import LOOP_KINDS
    from modeling.trainers import DEFAULT_TRAINERS, LOOP_DEFAULT_TRAINERS, trainers_for_kind

    names = [t.name for t in trainers_for_kind("fluency")]
    assert {"fluency-encoder", "fluency-finetune", "fluency-lstm4"} <= set(names)
    # A loop retrains every round (and refits its random arm): the head that fits in seconds.
    assert LOOP_DEFAULT_TRAINERS["fluency"] == "fluency-encoder" and LOOP_KINDS["fluency"][1] == "fluency-encoder"
    # A single new run: the fine-tuned encoder (docs/benchmarks.md).
    assert DEFAULT_TRAINERS["fluency"] == "fluency-finetune"


def test_one_class_only_is_refused_with_the_counts(db, alice, django_user_model):
    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=60, seed=6, name="oneclass fluency")
    fluent_only = {t: 1 for t in truth}
    vote(campaign, fluent_only, sorted(fluent_only), raters)
    run = _train(campaign, alice)
    assert run.status == TrainingRun.Status.FAILED
    assert "60 fluent, 0 not fluent" in run.error and "at least 3 of each class" in run.error
