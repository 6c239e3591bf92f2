"""Captioners on pretrained encoders from the model pack: a tiny ViT, ResNet and CLIP (random weights, built
here) registered as the pack registers any directory; features cached once per (release, encoder,
preprocessing), a killed cache build resumed, fine-tuning of the last blocks, clear errors for what does not fit,
missing images, and generation from such a version."""
from __future__ import annotations

import pytest
import torch
from django.core.files.storage import default_storage

from modeling import engine, registry
from modeling.captioning import features
from modeling.generate import generate_captions
from modeling.models import FeatureCache, TrainingRun
from modeling.trainers import get_trainer
from modeling.trainers.base import TrainingError
from pack.models import PretrainedModel

from .test_captioning import make_run, tiny_release
from .tiny_vision import build_tiny_resnet, build_tiny_vit, register

pytestmark = pytest.mark.django_db

FAST = {"device": "cpu", "seed": 1, "epochs": 2, "min_count": 1, "min_train_captions": 1, "min_vocabulary": 1,
        "embed": 16, "hidden": 16, "heads": 2, "layers": 1, "dropout": 0.0, "meteor": False, "beam_size": 2,
        "loader_workers": 0}


@pytest.fixture
def vit(models_dir):
    return register(models_dir, "tiny-vit", build_tiny_vit)


@pytest.fixture
def resnet(models_dir):
    return register(models_dir, "tiny-resnet", build_tiny_resnet)


@pytest.fixture
def encoded(monkeypatch):
    """How many batches the feature cache pushed through an encoder."""
    calls = []
    real = features.encode_batch

    def counting(encoder, values, device):
        calls.append(int(values.shape[0]))
        return real(encoder, values, device)

    monkeypatch.setattr(features, "encode_batch", counting)
    return calls


@pytest.fixture(autouse=True)
def _fresh_registry():
    registry.clear_cache()
    yield
    registry.clear_cache()


def train(trainer, release, **config):
    run = engine.train(engine.create_run(trainer, {**FAST, **config}, release=release).pk)
    assert run.status == TrainingRun.Status.DONE, (run.error, run.log[-2000:])
    return run


def test_the_pack_registers_vit_and_resnet_directories_as_vision_encoders(vit, resnet):
    assert (vit.kind, vit.architecture, vit.embedding_dim) == (PretrainedModel.Kind.VISION, "ViTModel", 16)
    assert (resnet.kind, resnet.architecture, resnet.embedding_dim) == (PretrainedModel.Kind.VISION, "ResNetModel", 16)


def test_an_lstm_and_a_transformer_train_from_one_feature_cache_computed_once(vit, encoded):
    release, _, _ = tiny_release("frozen", n=6, splits={"train": 0.67, "val": 0.0, "test": 0.33})
    lstm = train("captioner-lstm", release, encoder="tiny-vit", loader_workers=1)  # decoded by a worker process
    cache = FeatureCache.objects.get()
    assert cache.status == FeatureCache.Status.DONE and cache.images == 6 and cache.done == 6 and not cache.missing
    assert cache.pooled_dim == 16 and cache.grid_shape == [16, 16] and len(cache.shards) == 1
    assert default_storage.exists(cache.shards[0]) and sum(encoded) == 6
    info = lstm.model_version.config["info"]["encoder"]
    assert info["key"] == vit.key and info["mode"] == "frozen" and info["preprocessing"] == cache.preprocessing
    frozen = get_trainer("captioner-lstm").config(lstm.config)
    assert frozen["batch_size"] == 256 and "one batch per epoch" in lstm.log  # the frozen default, clamped
    assert lstm.data_summary["encoder"]["feature_cache"] == cache.pk
    # The artifact holds the decoder only: the encoder's weights come from the pack.
    state = registry.load_state_bytes(registry.read_storage(lstm.artifact, "artifact"), "artifact")
    assert not any(k.startswith("encoder.") for k in state)

    transformer = train("captioner-transformer", release, encoder="tiny-vit", feature_grid=2)
    assert FeatureCache.objects.count() == 1 and sum(encoded) == 6  # read, not computed again
    assert "reused" in transformer.log
    assert transformer.model_version.config["info"]["encoder"]["regions"] == 4  # 4 x 4 patches pooled to 2 x 2
    assert transformer.metrics["eval_images"] == transformer.metrics["eval_images_total"] == 2


def test_a_changed_preprocessing_builds_a_new_cache(resnet, encoded):
    release, _, _ = tiny_release("resized", n=4)
    train("captioner-transformer", release, encoder="tiny-resnet", epochs=1)
    train("captioner-transformer", release, encoder="tiny-resnet", epochs=1, encoder_image_size=64)
    first, second = FeatureCache.objects.order_by("pk")
    assert first.preprocessing != second.preprocessing and sum(encoded) == 8
    assert first.grid_shape == [16, 16] and second.grid_shape == [64, 16]  # a 4 x 4 map, then 8 x 8


def test_a_killed_cache_build_keeps_its_shards_and_computes_only_the_rest(vit, encoded, monkeypatch):
    release, _, _ = tiny_release("killed", n=6)
    monkeypatch.setattr(features, "SHARD_IMAGES", 2)
    trainer = get_trainer("captioner-lstm")
    row, _, spec, settings = trainer_spec(trainer, vit)
    cache = features.cache_for(release, row, settings, spec["preprocessing"])
    real = features.save_shard

    def dies_after_two_shards(name, tensors, keys):
        if name.endswith("shard-00002.safetensors"):
            raise KeyboardInterrupt("worker killed")
        return real(name, tensors, keys)

    monkeypatch.setattr(features, "save_shard", dies_after_two_shards)
    with pytest.raises(KeyboardInterrupt):
        features.cache_build(cache.pk, workers=0)
    cache.refresh_from_db()
    assert len(cache.shards) == 2 and cache.done == 4 and sum(encoded) == 6
    # The worker died without a word: its row says running until the heartbeat goes stale.
    FeatureCache.objects.filter(pk=cache.pk).update(status=FeatureCache.Status.RUNNING,
                                                    heartbeat_at=cache.heartbeat_at - features.STALE_AFTER * 2)
    monkeypatch.setattr(features, "save_shard", real)
    cache = features.cache_build(cache.pk, workers=0)
    assert cache.status == FeatureCache.Status.DONE and len(cache.shards) == 3 and sum(encoded) == 8
    index, pooled, grid = features.cache_read(cache)
    assert len(index) == 6 and pooled.shape == (6, 16) and pooled.dtype == torch.float16


def trainer_spec(trainer, model, **config):
    from modeling.trainers import captioner_encoders

    trainer.prepare  # noqa: B018 - loads torch and the captioner's modules
    return captioner_encoders.spec(trainer.config({**FAST, "encoder": model.name, **config}), trainer.decoder)


def test_fine_tuning_trains_the_last_blocks_at_a_lower_learning_rate(vit):
    release, _, _ = tiny_release("finetune", n=4)
    trainer = get_trainer("captioner-transformer")
    config = trainer.config({**FAST, "encoder": "tiny-vit", "encoder_mode": "finetune", "finetune_blocks": 1,
                             "batch_size": 4, "lr": 0.01})
    prepared = trainer.prepare(TrainingRun.objects.create(kind="captioner", config=config, release=release))
    assert "files" in prepared.train and FeatureCache.objects.count() == 0
    model = trainer.build(config, prepared.info)
    layers = model.encoder.blocks()
    assert not any(p.requires_grad for p in layers[0].parameters())
    assert all(p.requires_grad for p in layers[1].parameters())
    assert not any(p.requires_grad for p in model.encoder.body.embeddings.parameters())
    optimizer = trainer.optimizer(model, config)
    assert [g["lr"] for g in optimizer.param_groups] == [0.01, pytest.approx(0.001)]
    batch = next(iter(trainer.batches(prepared.train, config, 0, torch.Generator().manual_seed(0), True)))
    assert batch["pixels"].shape[1:] == (3, 32, 32)
    run = train("captioner-transformer", release, encoder="tiny-vit", encoder_mode="finetune", finetune_blocks=1,
                batch_size=4)
    state = registry.load_state_bytes(registry.read_storage(run.artifact, "artifact"), "artifact")
    assert any(k.startswith("encoder.body.") for k in state)  # the tuned encoder is part of the artifact


def test_what_does_not_fit_is_a_clear_error(vit, db):
    release, _, _ = tiny_release("misfit", n=2)
    trainer = get_trainer("captioner-transformer")
    PretrainedModel.objects.create(name="words-only", kind=PretrainedModel.Kind.TEXT, directory="nowhere",
                                   architecture="SentenceTransformer", weights_sha256="0" * 64, licence="MIT")
    cases = [({"encoder": "words-only"}, "sentence encoder"),
             ({"encoder": "nobody"}, "No model named 'nobody'"),
             ({"encoder": "tiny-vit", "encoder_weights": "/tmp/cnn.pt"}, "encoder_weights and encoder_version"),
             ({"encoder": "tiny-vit", "encoder_mode": "melted"}, "encoder_mode 'melted'"),
             ({"encoder": "tiny-vit", "encoder_mode": "finetune", "finetune_blocks": 5}, "has 2 blocks")]
    for config, message in cases:
        with pytest.raises(TrainingError) as caught:
            trainer.prepare(make_run(release, "captioner-transformer", **FAST, **config))
        assert caught.value.code == "bad_config" and message in caught.value.message, caught.value.message


def test_missing_images_are_counted_in_the_cache_and_fail_the_run_or_are_skipped(vit):
    release, _, images = tiny_release("gaps", n=4)
    default_storage.delete(images[2].file.name)
    trainer = get_trainer("captioner-lstm")
    with pytest.raises(TrainingError) as caught:
        trainer.prepare(make_run(release, **FAST, encoder="tiny-vit"))
    assert caught.value.code == "missing_images" and images[2].file.name in caught.value.message
    cache = FeatureCache.objects.get()
    assert cache.status == FeatureCache.Status.DONE and cache.images == 4 and len(cache.missing) == 1
    prepared = trainer.prepare(make_run(release, **FAST, encoder="tiny-vit", missing_images="skip"))
    assert prepared.summary["missing_images"] == 1 and prepared.summary["train"] == {"captions": 6, "images": 3}
    assert prepared.train["pooled"].shape == (3, 16)


def test_a_version_on_a_pretrained_encoder_generates_captions_from_images(vit, tiny_clip):
    release, _, _ = tiny_release("generate", n=4, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    for encoder in ("tiny-vit", "tiny-clip"):
        run = train("captioner-lstm", release, encoder=encoder, epochs=1)
        registry.clear_cache()
        captions = generate_captions(run.model_version, beam_size=2)
        assert len(captions) == 2 and all(c.metadata["model_version"] == run.model_version.pk for c in captions)
    clip_info = run.model_version.config["info"]["encoder"]
    assert clip_info["pooled_dim"] == 16 and clip_info["grid_dim"] == 32  # CLIP's projected embedding; its patches
