"""The four-way LSTM fluency classifier (seed 004) trained by the engine from a fluency campaign's
consistent votes: the training set, refusals, separation on a held-out split next to the seed's
baselines, branches left out, scoring and reranking with a registered version."""
import random

import pytest

from annotation.models import Aggregate
from curation.models import Caption
from modeling import engine, registry
from modeling.fluency import NoFluencyModel, rerank, score
from modeling.models import ModelVersion, TrainingRun
from modeling.trainers import get_trainer
from modeling.trainers.base import TrainingError
from modeling.trainers.fluency import binary_metrics, length_baseline, random_guess
from tests.curation.test_fluency_filter import FLUENT, TINY, make_fluency_campaign, scramble, train_tiny


def test_defaults_are_the_seeds_hyper_parameters():
    trainer = get_trainer("fluency-lstm4")
    config = trainer.config({})
    assert trainer.kind == "fluency"
    assert (config["embedding"], config["hidden"], config["batch_size"]) == (512, 512, 64)
    assert config["lr"] == 1e-4 and tuple(config["betas"]) == (0.9, 0.9) and config["eps"] == 1e-6
    assert 0 < config["dropout"] < 1
    model = trainer.build(config, {"branches": ["words", "pos"], "vocabs": {"words": ["<pad>", "<unk>", "a"],
                                                                          "pos": ["<pad>", "<unk>", "DET"]}})
    optimizer = trainer.optimizer(model, trainer.config({"lr": 0.5}))
    group = optimizer.param_groups[0]
    assert group["lr"] == 0.5 and group["betas"] == (0.9, 0.9) and group["eps"] == 1e-6
    assert model.branches["words"].lstm.hidden_size == 512


def test_training_set_is_the_consistent_votes_only(db, alice, django_user_model):
    campaign, labels = make_fluency_campaign(alice, django_user_model, difficult=3, disagree=2)
    assert not Aggregate.objects.filter(task__campaign=campaign).exists()  # never aggregated yet
    run = TrainingRun(campaign=campaign, config={**TINY})
    prepared = get_trainer("fluency-lstm4").prepare(run)
    # the trainer aggregated the campaign itself
    assert Aggregate.objects.filter(task__campaign=campaign, method="consistent").count() == len(labels)
    summary = prepared.summary
    assert summary["labels"] == {"fluent": 80, "not_fluent": 80}
    assert summary["left_out"] == {"difficult": 3, "disagree": 2}
    splits = summary["splits"]
    assert sum(s["fluent"] + s["not_fluent"] for s in splits.values()) == 160
    assert splits["test"] == {"fluent": 20, "not_fluent": 20}  # stratified, 25 %
    used = {e["task"] for part in (prepared.train, prepared.val, prepared.test) for e in part}
    assert len(used) == 160
    left_out = [c for c, v in labels.items() if v is None]
    assert len(left_out) == 5
    assert not used & set(campaign.tasks.filter(caption_id__in=left_out).values_list("pk", flat=True))
    # English captions without source texts: the POS branch (spaCy) is in, the source branches are out
    assert summary["branches"] == ["words", "pos"]
    assert summary["branches_left_out"] == ["src_words", "src_pos"]
    assert any("Source words and source POS branches left out" in n for n in summary["notes"])
    # vocabularies come from the training split only
    train_words = {w for e in prepared.train for w in e["ids"]["words"]}
    assert 1 not in train_words  # no <unk> in training
    # the same seed gives the same split and hash; another seed another split
    again = get_trainer("fluency-lstm4").prepare(TrainingRun(campaign=campaign, config={**TINY}))
    assert again.data_hash == prepared.data_hash
    assert [e["task"] for e in again.test] == [e["task"] for e in prepared.test]
    other = get_trainer("fluency-lstm4").prepare(TrainingRun(campaign=campaign, config={**TINY, "seed": 99}))
    assert [e["task"] for e in other.test] != [e["task"] for e in prepared.test]


def test_too_few_labels_are_refused_with_the_counts(db, alice, django_user_model):
    campaign, _ = make_fluency_campaign(alice, django_user_model, sentences=FLUENT[:6], difficult=1, disagree=1)
    run = engine.create_run("fluency-lstm4", dict(TINY), campaign=campaign, user=alice)
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "need at least 20 consistent labels" in run.error
    assert "present: 12 (6 fluent, 6 not fluent; 2 left out" in run.error
    assert not ModelVersion.objects.exists()
    # one class missing is refused even with enough labels
    with pytest.raises(TrainingError) as err:
        get_trainer("fluency-lstm4").check_counts([{"label": 1}] * 25, {}, {**TINY, "min_per_class": 3})
    assert err.value.code == "too_few_labels" and "25 fluent, 0 not fluent" in err.value.message


def test_not_a_fluency_campaign_is_refused(db, alice, django_user_model):
    from annotation import services
    from tests.annotation.conftest import make_collection

    collection = make_collection(name="quality photos", n=3)
    campaign = services.campaign_create(name="quality", kind="quality", selection={"collection": collection.pk},
                                        user=alice, status="running")
    with pytest.raises(TrainingError, match="fluency campaign"):
        get_trainer("fluency-lstm4").prepare(TrainingRun(campaign=campaign, config={}))


def test_the_classifier_separates_fluent_from_scrambled_sentences(db, alice, django_user_model):
    campaign, _ = make_fluency_campaign(alice, django_user_model)
    run = train_tiny(campaign, alice)
    assert run.status == TrainingRun.Status.DONE, run.error
    metrics = run.metrics
    assert metrics["n_test"] == 40
    # chance is 0.5 on this balanced split
    assert metrics["accuracy"] >= 0.8, metrics
    assert metrics["f1"] >= 0.75 and metrics["precision"] > 0.5 and metrics["recall"] > 0.5
    assert set(metrics["branches"]) == {"words", "pos"}
    baselines = metrics["baselines"]
    assert baselines["random_guess"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "accuracy": 0.5}
    length = baselines["length_rated"]
    # scrambled sentences have one word more: the length baseline is a real, but weaker, signal
    assert set(length) == {"precision", "recall", "f1", "accuracy", "threshold"} and length["threshold"] > 3
    assert metrics["accuracy"] > baselines["random_guess"]["accuracy"]
    assert "length_source" not in baselines
    # the run says which branches it left out
    assert "Source words and source POS branches left out" in run.log
    assert run.data_summary["left_out"] == {"difficult": 2, "disagree": 2}
    version = run.model_version
    assert version.config["trainer"] == "fluency-lstm4" and version.config["info"]["branches"] == ["words", "pos"]


def test_score_and_rerank_with_the_active_version(db, alice, django_user_model):
    with pytest.raises(NoFluencyModel):
        score(["a surfer rides a wave"])
    campaign, _ = make_fluency_campaign(alice, django_user_model)
    run = train_tiny(campaign, alice)
    # Scored on 40 test items, under the rule's 50 (modeling.verdicts): activated on purpose, to score with.
    registry.activate(run.model_version, alice, force=True)
    rng = random.Random(5)
    good = ["a dog is running on the grass", "a man rides a horse on the beach"]
    bad = [scramble(s, rng) for s in good]
    fs = score(good + bad)
    assert len(fs) == 4 and all(0 <= f <= 1 for f in fs)
    # batched scoring gives the same numbers
    assert score(good + bad, batch_size=1) == pytest.approx(fs, abs=1e-5)
    assert score([]) == []
    ranked = rerank(bad + good)
    assert [f for _, f in ranked] == sorted(fs, reverse=True)
    assert sorted(t for t, _ in ranked) == sorted(bad + good)
    assert {t for t, _ in ranked[:2]} == set(good)
    # by version number too
    assert score(good, version=run.model_version.version) == pytest.approx(fs[:2], abs=1e-6)
    with pytest.raises(NoFluencyModel, match="version 42"):
        score(good, version=42)


def test_source_branches_and_a_language_without_a_spacy_pipeline(db, alice, django_user_model):
    """Machine-translated captions (language "xx", no spaCy pipeline) whose parents are the English
    sources: the rated sentence's POS branch is left out and said so; the source words and source POS
    branches are in, and the source-length baseline is computed."""
    campaign, _ = make_fluency_campaign(alice, django_user_model, sentences=FLUENT)
    for caption in Caption.objects.filter(image__collection=campaign.collection):
        source = Caption.objects.create(image=caption.image, text=caption.text.capitalize() + ".",
                                        origin=Caption.Origin.DATASET, language="en", source="english")
        caption.parent = source
        caption.language = "xx"
        caption.origin = Caption.Origin.TRANSLATED
        caption.save()
    run = train_tiny(campaign, alice, epochs=2)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert run.data_summary["branches"] == ["words", "src_words", "src_pos"]
    assert "no spaCy pipeline is installed for xx" in run.log
    assert set(run.metrics["branches"]) == {"words", "src_words", "src_pos"}
    assert "length_source" in run.metrics["baselines"]


def test_metric_helpers_by_hand():
    assert binary_metrics([1, 1, 0, 0], [1, 0, 1, 0]) == {"precision": 0.5, "recall": 0.5, "f1": 0.5,
                                                          "accuracy": 0.5}
    # threshold = mean length of the fluent training sentences = (4 + 6) / 2 = 5; fluent if shorter
    out = length_baseline([4, 6, 9], [1, 1, 0], [3, 5, 8, 4], [1, 1, 0, 0])
    assert out["threshold"] == 5.0
    assert (out["precision"], out["recall"]) == (0.5, 0.5)  # predicted fluent: 3 and 4 -> one right
    assert random_guess([1, 0, 0, 0])["precision"] == 0.25 and random_guess([1, 0, 0, 0])["recall"] == 0.5
