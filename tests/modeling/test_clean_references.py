"""Clean references: a release built after generation holds no model captions unless asked, never in
its test split; a captioner is not scored against a release whose test split holds its own outputs."""
from __future__ import annotations

import pytest

from curation.models import Caption
from modeling import engine, generate, registry
from modeling.captioning.references import check_release_references, generated_test_references
from modeling.models import Kind, TrainingRun
from modeling.trainers.base import TrainingError
from releases.freeze import freeze

from ..curation.release_helpers import make_release
from .test_captioning import tiny_release
from .test_generate import SMALL

pytestmark = pytest.mark.django_db

HALF = {"train": 0.5, "val": 0.0, "test": 0.5}
# A tiny release on purpose: the data floors guard real runs, not this one.
CONFIG = dict(SMALL, min_train_captions=1, min_vocabulary=1)


def fake_beam(version, rows, beam_size, reranker, progress):
    """The captioner's beam search, stood in for: what is tested is where its captions go."""
    for row in rows:
        yield row, f"a square seen by captioner v{version.version}", [[f"a square v{version.version}", -1.0]]


@pytest.fixture
def generated(alice, monkeypatch):
    """A captioner-lstm version of a tiny release, and its captions of the release's images stored
    by ``generate_captions`` (the beam search replaced: the captioner trainer is tested elsewhere)."""
    release, collection, _ = tiny_release(n=6, splits=HALF)
    run = TrainingRun.objects.create(kind=Kind.CAPTIONER, config=dict(CONFIG, trainer="captioner-lstm"),
                                     release=release, status=TrainingRun.Status.DONE)
    version = registry.register_version(run, "modeling/runs/x.pt", "0" * 64, "captioner-lstm", run.config,
                                       {"release": release.pk, "eval_split": "test"}, {})
    monkeypatch.setattr(generate, "_beam", fake_beam)
    made = generate.generate_captions(version) + generate.generate_captions(version, split="train")
    assert made and all(c.origin == Caption.Origin.MODEL for c in made)
    return version, collection


def test_a_release_built_after_generation_holds_model_captions_only_when_asked(generated):
    version, collection = generated
    plain = freeze(make_release("after", collections=[collection.pk], splits=HALF))
    assert not plain.items.filter(caption__origin="model").exists()

    asked = freeze(make_release("asked", collections=[collection.pk], splits=HALF, include_model_captions=True))
    assert asked.items.filter(caption__origin="model").exists()
    assert asked.items.filter(split="test").exists()
    assert not asked.items.filter(split="test", caption__origin="model").exists()
    assert generated_test_references(asked) == {}
    check_release_references(asked, version)  # nothing of its own to score against: allowed


def test_scoring_a_captioner_against_its_own_outputs_is_refused(generated, alice):
    version, collection = generated
    # As a release frozen before model captions were kept out of test splits would hold them.
    old = freeze(make_release("old", collections=[collection.pk], splits=HALF, include_model_captions=True))
    old.items.filter(caption__origin="model").update(split="test")
    assert generated_test_references(old) == {version.pk: old.items.filter(caption__origin="model").count()}

    with pytest.raises(TrainingError) as refused:
        check_release_references(old, version)
    assert refused.value.code == "own_outputs" and f"captioner v{version.version}" in refused.value.message
    before = TrainingRun.objects.count()
    with pytest.raises(TrainingError) as refused:  # a new run of the same trainer: the same lineage
        engine.create_run("captioner-lstm", dict(CONFIG), release=old, user=alice)
    assert refused.value.code == "own_outputs" and TrainingRun.objects.count() == before

    # Another lineage is not refused here (its page flags references that are not human-verified).
    engine.create_run("captioner-transformer", dict(CONFIG), release=old, user=alice)
