"""The CNN weakly supervised by LDA topic distributions (seed 000, Section 4) and the CWS captioner that
starts from it: the real ``lda_topics`` step labels a tiny AVA-style collection (two themes, water and
buildings, whose images differ in colour), the "topic-cnn" trainer learns to predict those labels from
the pixels through the engine, and a captioner with ``encoder_version`` starts from its weights."""
from __future__ import annotations

import io
import random

import pytest
import torch
from django.core.files.storage import default_storage
from PIL import Image as PILImage

from curation.models import Collection, FilterRun, ImageTopics
from curation.pipeline import topics
from modeling import engine
from modeling.models import Kind, ModelVersion, TrainingRun
from modeling.trainers import get_trainer
from modeling.trainers.base import TrainingError
from releases.freeze import freeze

from ..curation.release_helpers import add_caption, add_image, decide, make_release

# Comments in the style of two of seed 000's topics (water/reflection and buildings); every image gets
# three comments of its theme, so LDA puts the two themes in different topics.
WATER = [
    "The reflection in the water is lovely and the lake looks calm.",
    "Great reflection of the boat on the lake water.",
    "The river reflection and the calm water surface work well.",
    "Nice mirror reflection, the lake water is so still.",
    "The pier and its reflection in the calm lake make the image.",
]
BUILDING = [
    "The church tower and the old roof make a strong architecture shot.",
    "The building facade and the tower against the skyline are great.",
    "Love the arch of the church and the stone building.",
    "The cathedral roof and the tower lines lead the eye.",
    "The skyline with the tall tower and the old building works.",
]
LDA_PARAMS = {"n_topics": 2, "max_doc_freq": 0.6, "min_doc_count": 2, "max_iter": 50, "random_state": 7}
SIZES = {"image_size": 16, "feature_dim": 16, "width": 4}
STEPS = [
    {"filter": "informativeness", "version": 1, "label": "Informativeness", "target": "caption",
     "run_level": False, "transform": False, "params": {}},
    {"filter": "lda_topics", "version": 1, "label": "LDA topic labels", "target": "caption",
     "run_level": True, "transform": False, "params": LDA_PARAMS},
]


def themed_png(water: bool, seed: int, size: int = 24) -> bytes:
    """Blue-ish noisy pixels for water, brown-ish for buildings; every seed gives different bytes."""
    rng = random.Random(seed)
    base = (40, 90, 200) if water else (150, 100, 60)
    img = PILImage.new("RGB", (size, size))
    img.putdata([tuple(max(0, min(255, c + rng.randint(-30, 30))) for c in base) for _ in range(size * size)])
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def themed_collection(name="ava", n_images=8):
    collection = Collection.objects.create(name=name, source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    images, captions = [], []
    for i in range(n_images):
        water = i % 2 == 0
        image = add_image(collection, themed_png(water, seed=i), external_id=f"{name}-{i}")
        theme = WATER if water else BUILDING
        captions += [add_caption(image, theme[(i + k) % 5], origin="comment", source="ava")
                     for k in range(3)]
        images.append(image)
    return collection, images, captions


def lda_run(collection, captions, n_labelled=None, params=None):
    """A finished informativeness + lda_topics run: every comment kept by the informativeness step,
    then the real LDA step fitted on the comments and its distributions stored as ImageTopics.
    ``n_labelled`` keeps only the first images' comments in the LDA step (the others get no topics)."""
    run = FilterRun.objects.create(collection=collection, snapshot=STEPS, status=FilterRun.Status.DONE)
    for caption in captions:
        decide(run, 0, caption.image, caption, "keep", score=1.0)
    labelled_images = sorted({c.image_id for c in captions})[:n_labelled]
    rows = [{"caption_id": c.pk, "image_id": c.image_id, "text": c.text, "entity_types": [], "sha256": None,
             "phash": None, "score": None} for c in captions if c.image_id in labelled_images]
    lda = topics.LdaTopics({**LDA_PARAMS, **(params or {})})
    decisions = lda.decide_run(rows)
    by_pk = {c.pk: c for c in captions}
    for caption_id, decision in decisions.items():
        decide(run, 1, by_pk[caption_id].image, by_pk[caption_id], decision.outcome, score=decision.score)
    artifact = topics.save_run_topics(lda, run)
    return run, artifact


def cs_release(name="cs", n_images=8, n_labelled=None, params=None):
    collection, images, captions = themed_collection(f"{name}-col", n_images)
    run, artifact = lda_run(collection, captions, n_labelled, params)
    release = make_release(name, collections=[collection.pk], run=run.pk,
                           splits={"train": 1.0, "val": 0.0, "test": 0.0})
    freeze(release)
    release.refresh_from_db()
    return release, artifact, images


def topic_cnn_config(**extra):
    return {"device": "cpu", "seed": 3, "epochs": 6, "batch_size": 4, "lr": 0.01, **SIZES, **extra}


@pytest.mark.django_db
def test_topic_cnn_learns_the_lda_distributions_and_a_cws_captioner_starts_from_it():
    release, artifact, images = cs_release()
    stored = {row.image_id: row.distribution for row in ImageTopics.objects.filter(artifact=artifact)}
    assert len(stored) == 8 and all(abs(sum(d) - 1) < 1e-3 and len(d) == 2 for d in stored.values())
    water_topic = {max(range(2), key=stored[im.pk].__getitem__) for im in images[0::2]}
    building_topic = {max(range(2), key=stored[im.pk].__getitem__) for im in images[1::2]}
    assert len(water_topic) == len(building_topic) == 1 and water_topic != building_topic

    # --- the topic CNN, through the engine ----------------------------------------------------------
    run = engine.create_run("topic-cnn", topic_cnn_config(), release=release)
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert run.kind == Kind.TOPIC_CNN and run.device == "cpu"
    assert run.data_summary["train"] == {"images": 8} and run.data_summary["topics"] == 2
    ends = [h["loss"] for h in run.history if h.get("end")]
    assert len(ends) == 6
    assert ends[-1] < 0.8 * ends[0], ends  # cross-entropy to the topic distribution falls
    assert 0 <= run.metrics["cross_entropy"] < ends[0]
    assert run.metrics["top1_topic_agreement"] >= 0.75  # the colour gives the theme away
    version = ModelVersion.objects.get(run=run)
    assert version.kind == Kind.TOPIC_CNN and version.artifact == run.artifact
    with default_storage.open(version.artifact, "rb") as fh:
        topic_state = torch.load(fh, map_location="cpu", weights_only=True)
    assert set(topic_state) >= {"encoder.body.0.weight", "head.weight"}

    # --- the captioner's encoder starts from it ------------------------------------------------------
    cap_config = {"device": "cpu", "seed": 1, "epochs": 2, "batch_size": 8, "min_count": 1, **SIZES,
                  "min_train_captions": 1, "min_vocabulary": 1,
                  "embed": 16, "hidden": 16, "dropout": 0.0, "meteor": False, "beam_size": 2,
                  "encoder_version": version.pk}
    trainer = get_trainer("captioner-lstm")
    probe = TrainingRun.objects.create(kind=Kind.CAPTIONER, config=dict(cap_config, trainer=trainer.name),
                                       release=release)
    prepared = trainer.prepare(probe)
    model = trainer.build(trainer.config(probe.config), prepared.info)
    for key, value in model.encoder.state_dict().items():
        assert torch.equal(value, topic_state[f"encoder.{key}"]), key
    scratch = trainer.build(trainer.config({k: v for k, v in cap_config.items() if k != "encoder_version"}),
                            prepared.info)
    assert not torch.equal(scratch.encoder.body[0].weight, topic_state["encoder.body.0.weight"])

    cws = engine.train(engine.create_run("captioner-lstm", cap_config, release=release).pk)
    assert cws.status == TrainingRun.Status.DONE, cws.error
    assert cws.data_summary["regime"] == "CWS"
    assert cws.metrics["extras"]["regime"] == "CWS"
    assert any(f"topic CNN v{version.version}" in note for note in cws.data_summary["notes"])
    assert f"topic CNN v{version.version}" in cws.log
    assert ModelVersion.objects.get(run=cws).config["info"]["regime"] == "CWS"

    # the same release without the topic CNN is plain CS
    cs = get_trainer("captioner-lstm").prepare(TrainingRun.objects.create(
        kind=Kind.CAPTIONER, config={**{k: v for k, v in cap_config.items() if k != "encoder_version"},
                                     "trainer": "captioner-lstm"}, release=release))
    assert cs.info["regime"] == "CS"


@pytest.mark.django_db
def test_topics_of_another_collection_do_not_hide_this_releases_topics():
    release, artifact, _ = cs_release("first")
    # a newer lda_topics artifact (K = 3), fitted on another collection's images
    _, other_artifact, _ = cs_release("second", params={"n_topics": 3})
    assert other_artifact.pk > artifact.pk
    prepared = get_trainer("topic-cnn").prepare(engine.create_run("topic-cnn", topic_cnn_config(), release=release))
    assert prepared.summary["train"] == {"images": 8} and prepared.summary["topics"] == 2
    assert prepared.train["targets"].shape == (8, 2)


@pytest.mark.django_db
def test_too_few_images_with_topics_is_refused_with_the_counts():
    release, _, _ = cs_release("few", n_images=6, n_labelled=3)
    assert ImageTopics.objects.count() == 3
    run = engine.train(engine.create_run("topic-cnn", topic_cnn_config(min_images=4), release=release).pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "Too few images with LDA topic distributions: 3 in the train split, at least 4 are needed" in run.error
    assert not ModelVersion.objects.filter(run=run).exists()
    with pytest.raises(TrainingError) as info:
        get_trainer("topic-cnn").prepare(engine.create_run("topic-cnn", topic_cnn_config(min_images=4),
                                                           release=release))
    assert info.value.code == "too_few_labels"


@pytest.mark.django_db
def test_encoder_version_must_be_a_topic_cnn():
    release, _, _ = cs_release("bad", n_images=4)
    run = engine.train(engine.create_run("captioner-lstm", {"device": "cpu", "min_count": 1, **SIZES,
                                                            "encoder_version": 999999}, release=release).pk)
    assert run.status == TrainingRun.Status.FAILED
    assert "999999" in run.error and "not a topic-CNN model version" in run.error
