"""Generated captions back into curation (origin "model", lineage metadata) and a relevance+fluency
campaign whose tasks hold the candidates of two runs."""
from __future__ import annotations

import pytest

from annotation.models import Task
from curation.models import Caption
from modeling import engine
from modeling.generate import evaluation_campaign, generate_captions, generated_captions

from .test_captioning import tiny_release

pytestmark = pytest.mark.django_db

SMALL = {"min_count": 1, "min_train_captions": 1, "min_vocabulary": 1, "image_size": 16, "feature_dim": 32,
         "width": 8, "embed": 32, "hidden": 32, "dropout": 0.0, "heads": 2, "layers": 1, "batch_size": 16,
         "meteor": False, "epochs": 2, "device": "cpu", "seed": 1}


def test_generate_and_evaluation_campaign(alice):
    release, collection, images = tiny_release(n=4, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    runs = []
    for trainer in ("captioner-lstm", "captioner-transformer"):
        run = engine.create_run(trainer, dict(SMALL), release=release, user=alice)
        engine.train(run.pk)
        run.refresh_from_db()
        assert run.status == "done", (run.error, run.log[-2000:])
        runs.append(run)
    version = runs[0].model_version
    made = generate_captions(version)
    test_images = set(release.items.filter(split="test").values_list("image_id", flat=True))
    assert {c.image_id for c in made} == test_images and len(made) == len(test_images)
    first = made[0]
    assert first.origin == Caption.Origin.MODEL and first.source == f"model captioner v{version.version}"
    assert first.metadata["model_version"] == version.pk and first.metadata["run"] == runs[0].pk
    assert len(first.metadata["candidates"]) == 5
    assert [c.pk for c in generate_captions(version)] == [c.pk for c in made]  # not duplicated
    campaign = evaluation_campaign(runs, "relevance_fluency", alice, "eval two runs")
    assert campaign.kind == "relevance_fluency" and campaign.selection["runs"] == [r.pk for r in runs]
    tasks = list(Task.objects.filter(campaign=campaign))
    ours = {v.pk: set(generated_captions(v).values_list("pk", flat=True)) for v in (r.model_version for r in runs)}
    assert tasks and all(t.image_id in test_images for t in tasks)
    for task in tasks:
        by_run = [len(set(task.candidates) & ids) for ids in ours.values()]
        assert by_run == [1, 1] and len(task.candidates) == 2
    quality = evaluation_campaign(runs[:1], "quality", alice, "good bad")
    assert Task.objects.filter(campaign=quality).count() == len(made)
