"""Sentence encoders load from local files only: the packaged all-MiniLM-L6-v2 with every outside socket
blocked, a tiny encoder of the same format built here and loaded through the same code, and refusals for
a changed file, pickled weights and a missing package."""
import os
import socket
from pathlib import Path

import pytest

from modeling import encoders
from modeling.trainers.base import TrainingError
from tests.network_guard import OutsideConnection


def test_the_guard_catches_an_outside_connection_and_a_lookup(no_outside_network):
    with pytest.raises(OutsideConnection):
        socket.create_connection(("192.0.2.10", 443), timeout=1)  # TEST-NET-1: never routed
    with pytest.raises(OutsideConnection):
        socket.getaddrinfo("huggingface.co", 443)
    assert len(no_outside_network) == 2
    no_outside_network.clear()


def test_the_platform_runs_the_hugging_face_libraries_offline():
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_the_packaged_encoder_loads_and_embeds_with_outside_sockets_blocked(db, no_outside_network):
    encoders.clear_cache()
    vectors = encoders.embed(["a surfer rides a wave", "surfer a wave rides a a"])
    assert vectors.shape == (2, 384)
    assert float(vectors[0] @ vectors[1]) > 0.5  # the same words, a related vector
    assert encoders.verify(encoders.MINILM).name == "model"  # every listed file has its recorded sha256


def test_training_the_encoder_head_opens_no_outside_socket(db, alice, django_user_model, no_outside_network):
    from modeling import engine
    from tests.modeling.loop_helpers import make_pool_campaign, vote

    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=40, seed=9, name="offline fluency")
    vote(campaign, truth, sorted(truth), raters)
    encoders.clear_cache()
    run = engine.train(engine.create_run("fluency-encoder", {"cv_folds": 0}, campaign=campaign).pk)
    assert run.status == "done", run.error


def _tiny_encoder(folder: Path) -> Path:
    """A sentence-transformers directory of the packaged format with a 2-layer, 32-wide BERT and random
    weights: the packaged vocabulary, safetensors weights, mean pooling."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    base = folder / "bert"
    tokenizer = BertTokenizerFast(vocab_file=str(encoders.MINILM.path() / "vocab.txt"))
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(base)
    tokenizer.save_pretrained(base)
    word = models.Transformer(str(base), max_seq_length=64)
    out = folder / "tiny-encoder"
    SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension())]).save(str(out))
    return out


def test_a_tiny_encoder_of_the_same_format_loads_through_the_same_code_and_its_hashes_are_checked(db, tmp_path):
    directory = _tiny_encoder(tmp_path)
    files = encoders.manifest(directory)
    assert "model.safetensors" in files and not any(name.endswith(".bin") for name in files)
    spec = encoders.register(encoders.EncoderSpec(name="tiny-test", directory=directory, files=files,
                                                  licence="Apache-2.0 (test)"))
    assert encoders.embed(["a dog on a beach"], "tiny-test").shape == (1, 32)
    # A file changed after registration: refused, never loaded.
    (directory / "config.json").write_text((directory / "config.json").read_text() + "\n")
    encoders.clear_cache()
    with pytest.raises(TrainingError) as changed:
        encoders.load("tiny-test")
    assert changed.value.code == "encoder_changed" and "config.json" in str(changed.value)
    # Pickled weights beside the safetensors: refused.
    encoders.register(encoders.EncoderSpec(name="tiny-test", directory=directory, files=encoders.manifest(directory),
                                           licence="Apache-2.0 (test)"))
    (directory / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(TrainingError) as pickled:
        encoders.load("tiny-test")
    assert pickled.value.code == "unsafe_weights" and "pytorch_model.bin" in str(pickled.value)
    # A missing file.
    (directory / "pytorch_model.bin").unlink()
    (directory / "model.safetensors").unlink()
    with pytest.raises(TrainingError) as missing:
        encoders.load("tiny-test")
    assert missing.value.code == "encoder_missing"
    assert spec.licence and encoders.describe("tiny-test")["licence"] == "Apache-2.0 (test)"


def test_an_encoder_package_that_is_not_installed_gives_a_clear_error(db):
    spec = encoders.register(encoders.EncoderSpec(name="not-installed", directory=None, package="no_such_encoder_pkg",
                                                  files={"model.safetensors": "0" * 64}, licence="MIT"))
    with pytest.raises(TrainingError) as missing:
        encoders.load(spec.name)
    assert missing.value.code == "encoder_missing" and "pip install" in str(missing.value)
    with pytest.raises(TrainingError):
        encoders.register(encoders.EncoderSpec(name="no-licence", directory=Path("/tmp"), files={"a": "b"}))
