"""The "fluency-detector" trainer: an error detector pre-trained on synthetic corruptions of the unlabelled
pool, calibrated on the human labels, judged on hand-written captions with realistic MT errors
(tests/modeling/data/fluency_dev.tsv) against the trivial baselines; its fallback, its cache and the
fluency filter step."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from curation.pipeline.base import Item
from modeling import engine
from modeling.evaluation import binary_report, majority_baseline
from modeling.fluency import score
from modeling.fluency_step import FluencyFilter
from modeling.models import TrainingRun
from modeling.trainers import fluency_pretrain
from modeling.trainers.fluency_baselines import length_baseline
from modeling.trainers.fluency_data import n_words
from tests.annotation.conftest import make_annotators

DEV = Path(__file__).parent / "data" / "fluency_dev.tsv"
# Small pre-training for CI (2 cores): the measured defaults are in benchmarks/fluency_dev.py.
FAST = {"device": "cpu", "pretrain_steps": 100, "variants": 3, "cv_folds": 0}


def read_dev(path: Path = DEV) -> list[tuple[str, int]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("label\t"):
            continue
        label, _error, _source, text = line.split("\t")
        rows.append((text.strip(), int(label)))
    return rows


def make_campaign(rows, user, django_user_model, name="dev fluency"):
    """A fluency campaign over ``rows`` [(text, label)]; returns (campaign, {task: label}, raters)."""
    from annotation import services
    from annotation.models import Task
    from curation.models import Caption, Collection, Image

    collection = Collection.objects.create(name=f"{name} photos", source_kind=Collection.SourceKind.TRANSLATED)
    by_caption = {}
    for k, (text, label) in enumerate(rows):
        image = Image.objects.create(collection=collection, sha256=f"{k + 1:064x}", width=640, height=480,
                                     format="JPEG", external_id=f"dev-{k}", status=Image.Status.READY)
        caption = Caption.objects.create(image=image, text=text, origin=Caption.Origin.TRANSLATED, language="en")
        by_caption[caption.pk] = label
    raters = make_annotators(django_user_model, 2, prefix=name.split()[0][:4])
    campaign = services.campaign_create(name=name, kind="fluency", selection={"collection": collection.pk},
                                        user=user, members=raters, status="running", votes_per_item=2)
    truth = {t.pk: by_caption[t.caption_id] for t in campaign.tasks.filter(role=Task.Role.REAL)}
    return campaign, truth, raters


def vote(campaign, truth, task_ids, raters):
    from tests.modeling.loop_helpers import vote as both_vote

    both_vote(campaign, truth, task_ids, raters)


def train(campaign, user, **config):
    run = engine.create_run("fluency-detector", {**FAST, **config}, campaign=campaign, user=user)
    return engine.train(run.pk)


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    fluency_pretrain.clear_cache()
    yield
    fluency_pretrain.clear_cache()


def test_at_200_labels_it_beats_the_best_trivial_baseline_by_015_on_unseen_captions(
        db, alice, django_user_model, media):
    rows = read_dev()
    campaign, truth, raters = make_campaign(rows, alice, django_user_model)
    tasks = sorted(truth)
    rng = random.Random(0)
    by_label = {0: [t for t in tasks if truth[t] == 0], 1: [t for t in tasks if truth[t] == 1]}
    train_tasks = []
    for group in by_label.values():
        rng.shuffle(group)
        train_tasks += group[:round(len(group) * 200 / len(tasks))]
    held = sorted(set(tasks) - set(train_tasks))
    vote(campaign, truth, tasks, raters)
    # The pool's texts (labels unread) are the pre-training corpus; the unseen items are kept out of training.
    run = train(campaign, alice, exclude_tasks=held, test_fraction=0.1)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert "fallback" not in run.data_summary
    assert run.data_summary["corpus"]["sentences"] == len(rows)
    fs = score([campaign.tasks.get(pk=t).caption.text for t in held], version=run.model_version)
    y = [truth[t] for t in held]
    model = binary_report(y, fs)["macro_f1"]
    majority = majority_baseline([truth[t] for t in train_tasks], y)["macro_f1"]
    texts = {t: campaign.tasks.get(pk=t).caption.text for t in tasks}
    rule = length_baseline([n_words(texts[t]) for t in train_tasks], [truth[t] for t in train_tasks],
                           [n_words(texts[t]) for t in held], y)
    length = binary_report(y, [1.0 if n_words(texts[t]) < rule["threshold"] else 0.0 for t in held])["macro_f1"]
    best = max(majority, 0.5, length)
    assert model >= best + 0.15, (model, majority, length)


def test_a_corpus_too_small_falls_back_to_the_encoder_features_and_says_so(db, alice, alice_client, django_user_model,
                                                                          media):
    rows = read_dev()[:60]
    campaign, truth, raters = make_campaign(rows, alice, django_user_model, name="small fluency")
    vote(campaign, truth, sorted(truth), raters)
    run = train(campaign, alice)
    assert run.status == TrainingRun.Status.DONE, run.error
    message = run.data_summary["fallback"]
    assert "60 usable sentences" in message and "at least 100" in message and "fluency-encoder" in message
    assert message in run.log
    assert run.model_version.config["info"]["fallback"] == message
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'id="fallback-warning"' in page and "fell back to the fluency-encoder features" in page.lower()
    fs = score(["A man ride a bicycle in the the park."], version=run.model_version)
    assert 0.0 <= fs[0] <= 1.0
    # No corpus at all (pool and crowd left out, no collections): the same fallback, never a crash.
    run = train(campaign, alice, corpus_pool=False, corpus_crowd=False)
    assert run.status == TrainingRun.Status.DONE, run.error
    assert "has 0 usable sentences" in run.data_summary["fallback"]


def test_the_detector_is_cached_per_corpus_and_the_filter_step_scores_with_it(
        db, alice, django_user_model, media, monkeypatch):
    rows = read_dev()[:140]
    campaign, truth, raters = make_campaign(rows, alice, django_user_model, name="cache fluency")
    vote(campaign, truth, sorted(truth), raters)
    small = {"pretrain_steps": 8, "crossfit": 1, "variants": 1}
    first = train(campaign, alice, **small)
    assert first.status == TrainingRun.Status.DONE, first.error
    assert first.data_summary["corpus"]["pretraining"]["reused"] is False
    fluency_pretrain.clear_cache()  # a new process: the detector comes back from storage, not retrained
    calls = []
    monkeypatch.setattr(fluency_pretrain, "train_detector", lambda *a, **k: calls.append(a) or (_ for _ in ()).throw(
        AssertionError("retrained")))
    second = train(campaign, alice, seed=1, **small)
    assert second.status == TrainingRun.Status.DONE, second.error
    assert second.data_summary["corpus"]["pretraining"]["reused"] is True and not calls
    assert second.model_version.config["info"]["detector"] == first.model_version.config["info"]["detector"]
    # The fluency filter step scores captions with the detector version.
    step = FluencyFilter({"version": second.model_version.version, "threshold": 0.5})
    texts = [rows[0][0], "The the a of of."]
    decisions = step.apply([Item(caption_id=n, image_id=n, raw_text=t, text=t) for n, t in enumerate(texts, 1)])
    assert [d.outcome for d in decisions] != ["na", "na"]
    assert all(d.details.get("model_version") == second.model_version.version for d in decisions)
    assert all(0.0 <= d.score <= 1.0 for d in decisions)
