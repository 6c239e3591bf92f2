"""A captioner is judged against trivial captioners on its own test images: the most frequent training caption,
nearest-neighbour retrieval over the model's image features (Devlin et al. 2015) and the raw source text; a captioner
below retrieval is marked on every page, the API and the CLI, and activated only with force; its intervals stay in
the metric's range; two runs are "not distinguishable" unless the paired interval excludes zero; a split too small
for retrieval says so."""
from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
import torch
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from modeling import engine, groups, registry
from modeling.captioning import baselines, bootstrap
from modeling.captioning.metrics import caption_metrics
from modeling.models import ModelVersion, TrainingRun
from modeling.trainers import get_trainer
from modeling.trainers.base import TrainingError

from .test_captioning import make_run, tiny_release
from .tiny_vision import build_tiny_vit, register

pytestmark = pytest.mark.django_db
CPU = torch.device("cpu")


def evaluated(release, **config):
    trainer = get_trainer("captioner-lstm")
    run = make_run(release, min_train_captions=1, beam_size=1, **config)
    prepared = trainer.prepare(run)
    full = trainer.config(run.config)
    torch.manual_seed(0)
    model = trainer.build(full, prepared.info)
    return run, trainer, prepared, trainer.evaluate(model, prepared, CPU, full)


def finished(run, metrics, *, version=True):
    run.metrics, run.status = metrics, TrainingRun.Status.DONE
    run.save(update_fields=["metrics", "status"])
    if not version:
        return None
    number = ModelVersion.objects.filter(kind="captioner").count() + 1
    return ModelVersion.objects.create(kind="captioner", version=number, run=run, artifact=f"x{number}.pt",
                                       artifact_sha256="0" * 64, config={"trainer": "captioner-lstm"},
                                       metrics=metrics)


# --- the baselines themselves -----------------------------------------------------------------------

def test_retrieval_returns_the_consensus_caption_of_the_nearest_training_images():
    train = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
    captions = [["a red square", "a red box"], ["a red square on grey"], ["a blue sky"], ["the blue sky above"]]
    found = baselines.retrieval_captions(train, captions, np.array([[1, 0.05], [0.05, 1]]), k=2)
    assert found == ["a red square", "a blue sky"]  # the candidate most like the others, not the nearest one's first
    assert baselines.most_frequent_caption(["A dog.", "a cat", "a dog"]) == "a dog"
    assert "at least 2 training images" in baselines.skip_reason(1, train, train)


def test_corpus_bleu_is_recomputed_exactly_from_per_image_counts():
    refs = {i: [f"a {c} square on a table", f"the {c} picture"] for i, c in enumerate(["red", "green", "blue"])}
    cands = {0: "a red square", 1: "the green picture", 2: "a square on a table"}
    found = caption_metrics(refs, cands, meteor=False, per_image=True)
    counts = np.array(found["per_image"]["bleu_counts"], dtype=float)
    assert bootstrap.bleu_from_counts(counts.sum(axis=0)) == pytest.approx(found["BLEU-4"])
    assert np.mean(found["per_image"]["CIDEr"]) == pytest.approx(found["CIDEr"])


# --- a run on a small release ------------------------------------------------------------------------

def test_baselines_are_computed_on_the_runs_test_split_and_an_untrained_captioner_does_not_beat_retrieval():
    release, _, _ = tiny_release("judged", n=12, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    _, _, prepared, metrics = evaluated(release)
    base = metrics["caption_baselines"]
    assert set(base) >= {"most_frequent", "retrieval", "notes"} and "source_text" not in base
    for name in ("most_frequent", "retrieval"):
        assert {"BLEU-4", "ROUGE-L", "CIDEr"} <= set(base[name]) and 0 <= base[name]["BLEU-4"] <= 1
    assert base["most_frequent"]["caption"] in {"a red square", "the red picture"} or base["most_frequent"]["caption"]
    # sqrt of the training images: a local neighbourhood, not all of them
    assert base["retrieval"]["k"] == int(len(prepared.train["image_ids"]) ** 0.5) < len(prepared.train["image_ids"])
    assert baselines.neighbourhood(30, 36) == 6 and baselines.neighbourhood(30, 100_000) == 30
    verdict = metrics["retrieval_verdict"]
    assert verdict["beats_retrieval"] is False and "does not beat retrieval" in verdict["text"]
    assert verdict["images"] == metrics["eval_images"] == len(metrics["per_image"]["CIDEr"])
    assert verdict["model"] == pytest.approx(metrics["CIDEr"], abs=1e-3)


def test_the_raw_source_text_is_a_baseline_where_the_items_have_one():
    release, _, _ = tiny_release("sourced", n=12, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    item = release.items.filter(split="test").first()
    item.provenance = {**(item.provenance or {}), "lineage": [{"caption": 1, "origin": "transformed", "text": item.text},
                                                              {"caption": 2, "origin": "alt_text",
                                                               "text": "IMG_0042.jpg photo by staff"}]}
    item.save(update_fields=["provenance"])
    _, _, _, metrics = evaluated(release)
    source = metrics["caption_baselines"]["source_text"]
    assert source["images"] == 1 and source["CIDEr"] == pytest.approx(0.0, abs=1e-6)
    assert any("on the 1 of" in note for note in metrics["caption_baselines"]["notes"])


def test_intervals_are_bootstrapped_and_within_each_metrics_range():
    release, _, _ = tiny_release("ranges", n=12, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    _, _, _, metrics = evaluated(release)
    intervals = metrics["intervals"]
    assert 0.0 <= intervals["BLEU-4"]["low"] <= intervals["BLEU-4"]["high"] <= 1.0
    assert 0.0 <= intervals["CIDEr"]["low"] <= intervals["CIDEr"]["high"] <= 10.0
    # A group's t-interval over three seeds is cut to the range too (it ran to BLEU-4 -0.11 and CLIP-S 1.59).
    runs = [TrainingRun.objects.create(kind="captioner", config={"seed": s}, group="g-range",
                                       status=TrainingRun.Status.DONE, metrics={"BLEU-4": b, "CLIP-S": c})
            for s, b, c in ((1, 0.01, 0.07), (2, 0.2, 0.87), (3, 0.02, 0.6))]
    summary = {row["key"]: row for row in groups.group_summary(runs)}
    assert summary["BLEU-4"]["low"] == 0.0 and summary["CLIP-S"]["low"] == 0.0 and summary["CLIP-S"]["high"] <= 2.5


def test_a_split_too_small_for_retrieval_says_so_on_the_run_page_and_is_not_refused(client, curator):
    release, _, _ = tiny_release("small-split", n=2, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    run, _, _, metrics = evaluated(release)
    assert "retrieval" not in metrics["caption_baselines"] and metrics["retrieval_verdict"]["beats_retrieval"] is None
    version = finished(run, metrics)
    registry.check_activatable(version)  # nothing to judge by: not refused
    client.force_login(curator)
    page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert 'id="baselines-too-small"' in page and "at least 2 training images" in page


# --- marked and refused ------------------------------------------------------------------------------

def test_a_captioner_below_retrieval_is_marked_everywhere_and_activated_only_with_force(client, curator):
    release, _, _ = tiny_release("below", n=12, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    run, _, _, metrics = evaluated(release)
    version = finished(run, metrics)
    with pytest.raises(TrainingError) as caught:
        registry.activate(version)
    assert caught.value.code == "does_not_beat_retrieval" and "nearest-neighbour retrieval" in caught.value.message
    client.force_login(curator)
    run_page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert 'id="retrieval-verdict"' in run_page and "Does not beat retrieval" in run_page
    assert 'data-row="retrieval"' in run_page and 'data-row="most_frequent"' in run_page
    assert "below-retrieval" in client.get(reverse("model-list")).content.decode()
    api = client.get(f"/api/model-versions/{version.pk}/").json()
    assert api["beats_retrieval"] is False and api["caption_baselines"]["retrieval"]["CIDEr"] >= 0
    refused = client.post(f"/api/model-versions/{version.pk}/activate/", {}, content_type="application/json")
    assert refused.status_code == 400 and refused.json()["code"] == "does_not_beat_retrieval"
    out = StringIO()
    call_command("models", "--kind", "captioner", stdout=out)
    assert "does not beat retrieval" in out.getvalue() and "retrieval " in out.getvalue()
    with pytest.raises(CommandError, match="--force"):
        call_command("models", "activate", "captioner", str(version.version))
    call_command("models", "activate", "captioner", str(version.version), "--force", stdout=StringIO())
    version.refresh_from_db()
    assert version.active


def test_a_captioner_that_beats_retrieval_by_an_interval_above_zero_is_activated_without_force():
    from modeling.trainers.captioner_judge import retrieval_verdict

    rng = np.random.default_rng(2)
    retrieval = rng.uniform(0, 1, 30)
    above = retrieval_verdict(list(retrieval + 0.5), {"CIDEr": retrieval.mean(), "_per_image": {"CIDEr": retrieval}}, "")
    level = retrieval_verdict(list(retrieval + rng.normal(0, 0.2, 30)),
                              {"CIDEr": retrieval.mean(), "_per_image": {"CIDEr": retrieval}}, "")
    assert above["beats_retrieval"] is True and above["low"] > 0
    assert level["beats_retrieval"] is False and level["low"] <= 0 <= level["high"]  # higher is not enough
    run = TrainingRun.objects.create(kind="captioner", config={})
    version = finished(run, {"CIDEr": 1.0, "retrieval_verdict": above})
    assert registry.activate(version).active


def test_the_cli_shows_not_usable_for_a_captioner_version():
    run = TrainingRun.objects.create(kind="captioner", config={})
    version = finished(run, {"CIDEr": 0.1})
    ModelVersion.objects.filter(pk=version.pk).update(usable=False, usable_note="the same caption for all 9 images")
    out = StringIO()
    call_command("models", "--kind", "captioner", stdout=out)
    assert "not usable: the same caption for all 9 images" in out.getvalue()


# --- comparisons -------------------------------------------------------------------------------------

def per_image(values):
    return {"image_ids": list(range(len(values))), "CIDEr": list(values)}


def test_the_compare_page_says_not_distinguishable_unless_the_paired_interval_excludes_zero(client, curator):
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 2, 40)
    a = TrainingRun.objects.create(kind="captioner", config={"trainer": "captioner-lstm"})
    b = TrainingRun.objects.create(kind="captioner", config={"trainer": "captioner-transformer"})
    c = TrainingRun.objects.create(kind="captioner", config={"trainer": "captioner-transformer"})
    finished(a, {"CIDEr": base.mean(), "train_loss": 2.0, "per_image": per_image(base)}, version=False)
    noise = base + rng.normal(0, 0.3, 40)
    finished(b, {"CIDEr": noise.mean(), "train_loss": 1.0, "per_image": per_image(noise)}, version=False)
    finished(c, {"CIDEr": base.mean() + 1, "train_loss": 3.0, "per_image": per_image(base + 1)}, version=False)
    client.force_login(curator)
    page = client.get(reverse("training-compare") + f"?runs={a.pk}&runs={b.pk}&runs={c.pk}").content.decode()
    assert f"not distinguishable from #{a.pk}" in page and f"better than #{a.pk}" in page
    assert "train_loss" not in page  # losses of different models are not compared


def test_two_captioner_groups_below_retrieval_are_said_so_and_cider_uses_a_bootstrap_over_images(client, curator):
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 30)
    judged = {"caption_baselines": {"retrieval": {"CIDEr": 3.3}, "most_frequent": {"CIDEr": 0.85}},
              "retrieval_verdict": {"beats_retrieval": False, "text": "does not beat retrieval"}}
    for group, shift in (("ga", 0.0), ("gb", 0.01)):
        for seed in (1, 2, 3):
            values = base + shift + rng.normal(0, 0.05, 30)
            TrainingRun.objects.create(kind="captioner", config={"seed": seed, "trainer": "captioner-lstm"}, group=group,
                                       status=TrainingRun.Status.DONE,
                                       metrics={"CIDEr": values.mean(), "val_loss": shift, **judged,
                                                "per_image": per_image(values)})
    comparison = groups.compare_groups(groups.group_runs("ga"), groups.group_runs("gb"))
    rows = {row["key"]: row for row in comparison["rows"]}
    assert "val_loss" not in rows and rows["CIDEr"]["verdict"] == "same"
    assert rows["CIDEr"]["test"]["test"].startswith("bootstrap over seeds")
    assert comparison["retrieval_a"]["below_retrieval"] == 3 and comparison["retrieval_a"]["below_most_frequent"]
    client.force_login(curator)
    page = client.get(reverse("training-compare") + "?group_a=ga&group_b=gb").content.decode()
    assert "A is not distinguishable from B" in page and "3 of 3 run(s) do not beat retrieval" in page
    group_page = client.get(reverse("training-group-detail", args=["ga"])).content.decode()
    assert 'id="group-baselines"' in group_page and "below the most frequent caption" in group_page


def test_clip_s_is_shown_beside_the_human_references_clip_s_with_a_note_naming_the_model(tiny_clip, client, curator):
    release, _, _ = tiny_release("clip-ref", n=12, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    run, _, _, metrics = evaluated(release)
    clip = metrics["clip"]
    assert 0.0 <= clip["references_CLIP-S"] <= 2.5 and clip["model"] == tiny_clip.key
    assert tiny_clip.key in clip["note"] and "ViT-B/32" in clip["note"] and "references" in clip["note"]
    assert 0.0 <= metrics["intervals"]["CLIP-S"]["low"] <= metrics["intervals"]["CLIP-S"]["high"] <= 2.5
    finished(run, metrics)
    client.force_login(curator)
    page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert 'id="clip-note"' in page and tiny_clip.key in page
    out = StringIO()
    call_command("models", "--kind", "captioner", stdout=out)
    assert f"(references {clip['references_CLIP-S']:.3f}, {tiny_clip.key})" in out.getvalue()


def test_a_run_scored_on_its_train_split_is_not_judged_by_retrieval_of_its_own_images():
    release, _, _ = tiny_release("train-only", n=6)
    _, _, _, metrics = evaluated(release)
    assert "retrieval" not in metrics["caption_baselines"] and "most_frequent" in metrics["caption_baselines"]
    assert metrics["retrieval_verdict"]["beats_retrieval"] is None


@pytest.fixture
def vit(models_dir):
    return register(models_dir, "tiny-vit", build_tiny_vit)


def test_a_run_group_on_frozen_vit_features_is_judged_by_retrieval_over_those_features(vit, client, curator):
    release, _, _ = tiny_release("vit-group", n=12, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    config = {"device": "cpu", "epochs": 2, "min_count": 1, "min_train_captions": 1, "min_vocabulary": 1,
              "embed": 16, "hidden": 16, "dropout": 0.0, "meteor": False, "beam_size": 2, "loader_workers": 0,
              "encoder": "tiny-vit", "seed": 1}
    runs = [engine.train(r.pk) for r in groups.create_repeats("captioner-lstm", config, 2, release=release)]
    assert all(r.status == TrainingRun.Status.DONE for r in runs), [r.error for r in runs]
    for run in runs:
        stored = run.model_version.metrics
        assert stored["retrieval_verdict"]["beats_retrieval"] in (True, False)
        assert any("frozen tiny-vit features" in n for n in stored["caption_baselines"]["notes"])
    client.force_login(curator)
    page = client.get(reverse("training-group-detail", args=[runs[0].group])).content.decode()
    assert 'id="group-baselines"' in page and "caption_baselines.retrieval.CIDEr" in page
    listed = client.get(f"/api/training-runs/?group={runs[0].group}").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert all(r["caption_baselines"]["retrieval"]["CIDEr"] >= 0 for r in rows)
