"""The "fluency-finetune" trainer: the sentence encoder fine-tuned end to end with a linear head on the human
labels. Its mechanics with a tiny random-weight BERT built here (run -> 3-fold CV and verdict -> registered
version -> reloaded with weights_only -> scores -> the fluency filter step), and the packaged MiniLM on dev
set 1 (tests/modeling/data/fluency_dev.tsv) at 200 labels against the trivial baselines."""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from curation.pipeline.base import Item
from modeling import encoders, engine, registry
from modeling.evaluation import binary_report, majority_baseline
from modeling.fluency import score
from modeling.fluency_step import FluencyFilter
from modeling.models import TrainingRun
from modeling.trainers import get_trainer
from modeling.trainers.fluency_baselines import length_baseline
from modeling.trainers.fluency_data import n_words
from tests.modeling.test_fluency_detector import make_campaign, read_dev, vote

DEV = Path(__file__).parent / "data" / "fluency_dev.tsv"
# The second set, in another voice, written apart and looked at once: its first figure (2026-12-08, trained on
# 200 labels of dev set 1, seeds 0-2 of benchmarks/fluency_dev.py --test-data) was macro F1 0.635 ± 0.011
# against chance 0.5, majority 0.329 and the length rule 0.484.
SECOND = Path(__file__).parent / "data" / "fluency_second.tsv"


def _tiny_bert(folder: Path, texts: list[str]) -> Path:
    """A Hugging Face BERT directory: 2 layers, 32 wide, random weights (safetensors), a word-level
    vocabulary of the given texts."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab))
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def tiny_text_encoder(settings, tmp_path):
    """The tiny BERT registered as an encoder and made the configured text encoder."""
    rows = read_dev()
    directory = _tiny_bert(tmp_path / "tiny-bert", [t for t, _ in rows])
    encoders.register(encoders.EncoderSpec(name="tiny-finetune", directory=directory,
                                           files=encoders.manifest(directory), licence="Apache-2.0 (test)"))
    settings.TEXT_ENCODER = "tiny-finetune"
    settings.MEDIA_ROOT = str(tmp_path / "media")
    registry.clear_cache()
    yield directory
    registry.clear_cache()
    encoders.clear_cache()


def test_a_tiny_encoder_fine_tunes_registers_reloads_with_weights_only_and_filters(
        db, alice, django_user_model, tiny_text_encoder):
    import torch
    from safetensors.torch import load_file

    rows = read_dev()[:90]
    campaign, truth, raters = make_campaign(rows, alice, django_user_model, name="tiny fluency")
    vote(campaign, truth, sorted(truth), raters)
    run = engine.train(engine.create_run("fluency-finetune", {"device": "cpu", "epochs": 2}, campaign=campaign,
                                         user=alice).pk)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert run.data_summary["encoder"]["name"] == "tiny-finetune"
    assert "fine-tuned end to end" in run.data_summary["notes"][0]
    # 3-fold cross-validation under cv_below labels, and the verdict with the baselines on the test split.
    metrics = run.metrics
    assert metrics["cv"]["folds"] == 3 and metrics["verdict"]["basis"] == "cv"
    assert {"majority", "random_guess", "length_rated"} <= set(metrics["baselines"])
    version = run.model_version
    info = version.config["info"]
    assert info["finetuned"] is True and info["max_length"] == 96 and len(info["class_weights"]) == 2

    # The artifact: a plain state dict in half precision (weights_only loads it).
    state = registry.load_state_bytes(registry.read_storage(version.artifact, "test"), "test")
    assert state["head.weight"].dtype == torch.float16 and state["head.weight"].shape == (2, 32)
    # A new process: the architecture from the directory's config, the weights from the artifact (weights_only).
    registry.clear_cache()
    trainer, model, loaded_info = registry.load_version(version)
    assert trainer.name == "fluency-finetune" and loaded_info == info
    pretrained = load_file(str(tiny_text_encoder / "model.safetensors"))
    key = next(k for k in pretrained if k.endswith("word_embeddings.weight"))
    tuned = model.encoder.state_dict()[key.removeprefix("bert.")]
    assert tuned.shape == pretrained[key].shape and not torch.equal(tuned, pretrained[key])  # it trained
    texts = [rows[0][0], rows[1][0], "The the a of of."]
    fs = score(texts, version=version)
    assert len(fs) == 3 and all(0.0 <= f <= 1.0 for f in fs)
    assert fs == [round(p, 6) for p in trainer.predict_features(model, trainer.features_like(info, texts))]
    features = trainer.sampler_features(model, trainer.features_like(info, texts))
    assert features.shape == (3, 32)

    # The fluency filter step scores with the fine-tuned version.
    step = FluencyFilter({"version": version.version, "threshold": 0.5})
    decisions = step.apply([Item(caption_id=n, image_id=n, raw_text=t, text=t) for n, t in enumerate(texts, 1)])
    assert all(d.outcome != "na" for d in decisions)
    assert all(d.details.get("model_version") == version.version for d in decisions)
    assert [d.score for d in decisions] == fs


def test_a_fresh_build_reads_no_weights_and_training_starts_from_the_pretrained_ones(db, tiny_text_encoder):
    import torch
    from safetensors.torch import load_file

    trainer = get_trainer("fluency-finetune")
    config = trainer.config({"device": "cpu"})
    prepared = trainer.prepared_from_features(["a dog runs on the beach", "dog the a runs on"] * 4, [1, 0] * 4,
                                              config)
    model = trainer.build(config, prepared.info)
    pretrained = load_file(str(tiny_text_encoder / "model.safetensors"))
    key = next(k for k in pretrained if k.endswith("word_embeddings.weight"))
    name = key.removeprefix("bert.")
    assert not torch.equal(model.encoder.state_dict()[name], pretrained[key])
    trainer.optimizer(model, config)
    assert torch.equal(model.encoder.state_dict()[name], pretrained[key])
    assert not trainer.fast_refit  # the loop's random arm does not refit it per point


def test_at_200_labels_it_beats_the_best_trivial_baseline_by_015_on_dev_set_1_and_010_on_the_second_set(db):
    from modeling.engine import fit_in_memory

    rows = read_dev()
    rng = random.Random("fluency-dev:0")  # benchmarks/fluency_dev.py's split of seed 0
    train = []
    for label in (0, 1):
        group = [n for n, (_, y) in enumerate(rows) if y == label]
        rng.shuffle(group)
        train += group[:round(len(group) * 200 / len(rows))]
    held = sorted(set(range(len(rows))) - set(train))
    texts, y = [t for t, _ in rows], [label for _, label in rows]
    trainer = get_trainer("fluency-finetune")
    config = trainer.config({"device": "cpu", "seed": 0, "epochs": 7})
    x = trainer.features_like({}, texts)
    model = fit_in_memory(trainer, trainer.prepared_from_features(x[train], [y[n] for n in train], config), config)
    yt = [y[n] for n in held]
    f1 = binary_report(yt, trainer.predict_features(model, x[held]))["macro_f1"]
    majority = majority_baseline([y[n] for n in train], yt)["macro_f1"]
    rule = length_baseline([n_words(texts[n]) for n in train], [y[n] for n in train],
                           [n_words(texts[n]) for n in held], yt)
    length = binary_report(yt, [1.0 if n_words(texts[n]) < rule["threshold"] else 0.0 for n in held])["macro_f1"]
    assert len(train) == 200 and len(held) == len(rows) - 200
    assert f1 >= max(majority, 0.5, length) + 0.15, (f1, majority, length)

    # The same model on every item of the second set: another voice, other sources, other errors.
    second = read_dev(SECOND)
    s_texts, s_y = [t for t, _ in second], [label for _, label in second]
    s_f1 = binary_report(s_y, trainer.predict_features(model, trainer.features_like({}, s_texts)))["macro_f1"]
    s_majority = majority_baseline([y[n] for n in train], s_y)["macro_f1"]
    s_length = binary_report(s_y, [1.0 if n_words(t) < rule["threshold"] else 0.0 for t in s_texts])["macro_f1"]
    assert len(second) >= 180
    assert s_f1 >= max(s_majority, 0.5, s_length) + 0.10, (s_f1, s_majority, s_length)
