"""A captioner is evaluated on the whole test split unless the curator caps it (the cap recorded); its data
summary says how many references each test image has, whether they are human-verified and how many a model wrote;
a release with too few captions or a handful of words is refused."""
from __future__ import annotations

import pytest
import torch

from modeling.trainers import get_trainer
from modeling.trainers.base import TrainingError

from .test_captioning import make_run, tiny_release

pytestmark = pytest.mark.django_db


def prepared_and_model(release, **config):
    trainer = get_trainer("captioner-lstm")
    run = make_run(release, min_train_captions=1, **config)
    prepared = trainer.prepare(run)
    return trainer, prepared, trainer.build(trainer.config(run.config), prepared.info), trainer.config(run.config)


def test_the_whole_test_split_is_evaluated_unless_capped_and_the_cap_is_recorded():
    release, _, _ = tiny_release("whole", n=12, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    trainer, prepared, model, config = prepared_and_model(release, beam_size=1)
    total = len(prepared.test["image_ids"])
    assert total > 3  # more than the cap below, and the old silent limit did not apply to a default run
    metrics = trainer.evaluate(model, prepared, torch.device("cpu"), config)
    assert metrics["eval_images"] == metrics["eval_images_total"] == total and "eval_cap" not in metrics
    capped = trainer.evaluate(model, prepared, torch.device("cpu"), dict(config, max_eval_images=3))
    assert (capped["eval_images"], capped["eval_images_total"], capped["eval_cap"]) == (3, total, 3)


def test_the_data_summary_records_the_test_references_and_whether_people_verified_them():
    release, _, _ = tiny_release("refs", n=6, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    _, prepared, _, _ = prepared_and_model(release)
    assert prepared.summary["test_references"] == {"per_image": 2.0, "human_verified": False, "model_generated": 0}
    test_items = list(release.items.filter(split="test"))
    release.items.filter(split="test").update(human_verified=True)
    _, prepared, _, _ = prepared_and_model(release)
    assert prepared.summary["test_references"]["human_verified"] is True
    test_items[0].provenance = {**(test_items[0].provenance or {}), "origin": "model"}
    test_items[0].save(update_fields=["provenance"])
    _, prepared, _, _ = prepared_and_model(release)
    assert prepared.summary["test_references"]["model_generated"] == 1


def test_a_release_with_too_few_captions_or_words_is_refused_by_default():
    release, _, _ = tiny_release("small", n=6)
    trainer = get_trainer("captioner-lstm")
    assert trainer.config()["min_train_captions"] == 50 and trainer.config()["min_vocabulary"] == 20
    run = make_run(release)
    run.config.pop("min_train_captions"), run.config.pop("min_vocabulary")
    with pytest.raises(TrainingError) as caught:
        trainer.prepare(run)
    assert caught.value.code == "too_few_labels" and "has 12 usable caption(s), at least 50" in caught.value.message
    with pytest.raises(TrainingError) as caught:
        trainer.prepare(make_run(release, min_train_captions=10, min_vocabulary=20))
    assert caught.value.code == "too_few_labels" and "vocabulary has 10 word(s)" in caught.value.message
