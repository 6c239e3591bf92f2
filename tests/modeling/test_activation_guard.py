"""A classifier that does not pass the activation rule (modeling.verdicts: beat the best of majority, chance,
the length rule and the word-frequency rule by 0.05 macro F1 on at least 50 items, with a paired bootstrap
interval above zero) is flagged, and is activated only on purpose: through the registry, the models page,
the API and the CLI. Alice curates; Bob may not activate.

The constant classifier answers 0.9 ("fluent") for everything on data that is 70 % fluent: exactly what
the majority class does, so its macro F1 equals the majority's and the verdict says so. The "length
trainer" learns from noisy points whose texts give the class away by their length: it beats majority but
not seed 004's length rule."""
import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils.html import escape

from modeling import engine, registry
from modeling.models import ModelVersion
from modeling.trainers import register
from modeling.trainers.base import Prepared, TrainingError

from .test_early_stopping_cv import LOGISTIC, LogisticTrainer

pytestmark = pytest.mark.django_db


class ConstantTrainer(LogisticTrainer):
    """Trains the logistic regression, then ignores it: "fluent", with probability 0.9, for everything."""

    name = "test-constant"

    def predict_proba(self, model, split, device):
        return [0.9] * len(split[1])


register(ConstantTrainer())
SKEWED = {"device": "cpu", "seed": 2, "epochs": 3, "positive_share": 0.7}


@pytest.fixture
def constant():
    registry.clear_cache()
    run = engine.train(engine.create_run("test-constant", dict(SKEWED), name="always fluent").pk)
    assert run.status == "done", run.error
    return run.model_version


@pytest.fixture
def learned():
    run = engine.train(engine.create_run("test-logistic", dict(SKEWED, epochs=6, cv_folds=3), name="logistic").pk)
    assert run.status == "done", run.error
    return run.model_version


def _active():
    return list(ModelVersion.objects.filter(active=True))


def test_the_constant_classifier_is_judged_not_to_beat_majority(constant, learned):
    verdict = constant.metrics["verdict"]
    assert verdict["beats_majority"] is False and verdict["basis"] == "test" and verdict["activatable"] is False
    assert verdict["model"] == verdict["majority"]  # a constant answer is the majority class
    assert verdict["code"] == "does_not_beat_majority" and verdict["headline"] == "does not beat majority or chance"
    assert [r["code"] for r in verdict["reasons"]] == ["does_not_beat_majority", "too_few_evaluation_items"]
    assert "too few evaluation items: 24 < 50" in verdict["text"]
    assert learned.metrics["verdict"]["beats_majority"] is True and learned.metrics["verdict"]["activatable"] is True
    assert learned.metrics["verdict"]["basis"] == "cv" and learned.metrics["verdict"]["n"] == 120  # folds pooled
    low, high = learned.metrics["verdict"]["interval"]
    assert 0 < low <= learned.metrics["verdict"]["difference"] <= high


def test_registry_refuses_it_without_force(constant, learned, alice):
    with pytest.raises(TrainingError) as info:
        registry.activate(constant, alice)
    verdict = constant.metrics["verdict"]
    assert info.value.code == "does_not_beat_majority"
    assert f"macro F1 {verdict['model']:.3f} on 24 items" in str(info.value)
    assert "too few evaluation items: 24 < 50" in str(info.value) and "force" in str(info.value)
    assert _active() == []
    registry.activate(learned, alice)  # a model that beats it needs no force
    assert _active() == [learned]
    registry.activate(constant, alice, force=True)
    assert _active() == [constant]


def test_models_page_flags_it_and_needs_the_checkbox(alice_client, constant, learned):
    body = alice_client.get(reverse("model-list")).content.decode()
    assert body.count('data-status="flagged"') == 1 and "does not beat majority or chance</span>" in body
    assert "beats every baseline</span>" in body and 'id="activation-rule"' in body
    assert escape(constant.metrics["verdict"]["text"]) in body
    assert body.count('name="force"') == 1  # only the flagged version asks for "activate anyway"
    assert "activate anyway" in body

    url = reverse("model-activate", args=[constant.pk])
    refused = alice_client.post(url, follow=True)
    assert refused.status_code == 200 and "does not beat majority or chance" in refused.content.decode()
    assert _active() == []
    alice_client.post(url, {"force": "1"})
    assert _active() == [constant]
    alice_client.post(reverse("model-activate", args=[learned.pk]))
    assert _active() == [learned]


def test_the_runs_list_shows_the_same_verdict(alice_client, constant, learned):
    body = alice_client.get(reverse("training-run-list")).content.decode()
    assert f'title="{escape(constant.metrics["verdict"]["text"])}">does not beat majority or chance</span>' in body
    assert f'title="{escape(learned.metrics["verdict"]["text"])}">beats every baseline</span>' in body


def test_bob_cannot_force_it(bob_client, constant):
    response = bob_client.post(reverse("model-activate", args=[constant.pk]), {"force": "1"})
    assert response.status_code == 403 and _active() == []


def test_run_page_shows_the_verdict_and_the_evaluation(alice_client, constant, learned):
    body = alice_client.get(constant.run.get_absolute_url()).content.decode()
    banner = body.split('id="verdict"')[1].split("</div>")[0]
    assert "alert-error" in banner.split(">")[0] and "Flagged: does not beat majority or chance" in banner
    assert 'data-row="model"' in banner and 'data-row="majority"' in banner and "at least 50 evaluation items" in banner
    assert 'data-row="majority"' in body and 'data-row="random_guess"' in body
    per_class = body.split('id="evaluation"')[1].split("</section>")[0]
    assert ">fluent<" in per_class and ">not fluent<" in per_class and "table compact confusion" in per_class
    assert 'class="reliability"' in per_class and "ECE " in per_class
    assert 'name="force"' in body  # the run page's Activate asks for the checkbox too
    assert 'id="cross-validation"' not in body

    body = alice_client.get(learned.run.get_absolute_url()).content.decode()
    assert "Activatable: beats every baseline" in body and 'id="cross-validation"' in body and "3-fold cross-validation" in body
    assert " ± " in body.split('id="cross-validation"')[1] and 'name="force"' not in body


def test_loss_curve_marks_the_best_epoch_and_the_early_stop(alice_client, monkeypatch):
    monkeypatch.setattr(LOGISTIC, "val_script", [1.0, 0.5, 0.6, 0.7])
    run = engine.train(engine.create_run("test-logistic", {"device": "cpu", "epochs": 6,
                                                           "early_stopping_patience": 2}).pk)
    body = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'class="marker-best"' in body and "best (epoch 2)" in body
    assert 'class="marker-stopped-early"' in body and "stopped early (epoch 4)" in body
    assert "Stopped early after epoch 4 of 6" in body and "The weights of epoch 2, the lowest validation loss" in body


def test_api_needs_force_and_exposes_the_verdict(client, alice, constant, learned):
    client.force_login(alice)
    listed = {v["id"]: v for v in client.get("/api/model-versions/").json()["results"]}
    assert listed[constant.pk]["beats_majority"] is False and listed[learned.pk]["beats_majority"] is True
    assert listed[constant.pk]["verdict"]["text"] == constant.metrics["verdict"]["text"]
    assert listed[constant.pk]["flagged"] is True and listed[learned.pk]["flagged"] is False
    assert listed[constant.pk]["verdict"]["status"] == "flagged" and "50" in listed[constant.pk]["activation_rule"]

    url = f"/api/model-versions/{constant.pk}/activate/"
    refused = client.post(url, {}, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["code"] == "does_not_beat_majority" and "macro F1" in refused.json()["detail"]
    assert _active() == []
    assert client.post(url, {"force": "maybe"}, content_type="application/json").status_code == 400
    forced = client.post(url, {"force": True}, content_type="application/json")
    assert forced.status_code == 200 and forced.json()["active"] is True
    assert _active() == [constant]


def test_cli_lists_the_flag_and_activates_only_with_force(constant, learned):
    out = io.StringIO()
    call_command("models", stdout=out)
    flagged = [line for line in out.getvalue().splitlines() if "[FLAGGED: does not beat majority or chance]" in line]
    assert len(flagged) == 1 and f"v{constant.version} " in flagged[0] and "test-constant" in flagged[0]
    assert "Activation rule: A version is activated" in out.getvalue()
    assert f"verdict: {constant.metrics['verdict']['text']}" in out.getvalue()
    with pytest.raises(CommandError, match="does not beat majority or chance.*--force"):
        call_command("models", "activate", "fluency", str(constant.version))
    assert _active() == []
    call_command("models", "activate", "fluency", str(constant.version), "--force", stdout=io.StringIO())
    assert _active() == [constant]


def test_a_captioner_that_says_the_same_thing_for_every_image_is_registered_not_usable():
    from modeling.evaluation import unusable_note

    same = {"eval_images": 40, "diversity": {"unique_captions": 1 / 40, "vocabulary": 3}}
    unk = {"eval_images": 3, "diversity": {"unique_captions": 1 / 3, "vocabulary": 1}}
    varied = {"eval_images": 40, "diversity": {"unique_captions": 0.6, "vocabulary": 55}}
    assert unusable_note("captioner", same) == "the same caption for all 40 evaluated images"
    assert "vocabulary of 1 word" in unusable_note("captioner", unk)
    assert unusable_note("captioner", varied) == "" and unusable_note("fluency", same) == ""


# --- Every baseline, and enough items -------------------------------------------------------------


class LengthGivesItAwayTrainer(LogisticTrainer):
    """The logistic regression on noisy points (separation 1.2: a macro F1 around 0.7), each point carrying a
    caption whose length gives its class away: fluent ones are short, the others long. The model beats the
    majority class; seed 004's length rule scores above 0.9 on the same items."""

    name = "test-length-gives-away"

    def prepare(self, run):
        prepared = super().prepare(run)

        def with_texts(split):
            x, y = split
            # The same four words throughout (so word frequencies tell nothing): once for a fluent caption
            # (three times for every tenth), four times for the others.
            units = [(3 if n % 10 == 0 else 1) if label else 4 for n, label in enumerate(y.tolist())]
            return x, y, [" ".join(["the dog runs here"] * u) for u in units]

        return Prepared(train=with_texts(prepared.train), val=with_texts(prepared.val), test=with_texts(prepared.test),
                        info=prepared.info, data_hash=prepared.data_hash, summary=prepared.summary)

    def batches(self, split, config, epoch, generator, train):
        return super().batches(split[:2], config, epoch, generator, train)

    def texts(self, split):
        return list(split[2])


register(LengthGivesItAwayTrainer())


def test_a_version_that_beats_majority_but_not_the_length_rule_is_flagged_and_needs_force(alice):
    run = engine.train(engine.create_run("test-length-gives-away", {"device": "cpu", "seed": 1, "epochs": 6, "n": 300,
                                                                    "separation": 0.8}).pk)
    assert run.status == "done", run.error
    version = run.model_version
    verdict = version.metrics["verdict"]
    assert verdict["basis"] == "test" and verdict["n"] == 60  # the held-out fifth of 300: enough items
    assert verdict["model"] - verdict["baselines"]["majority"]["macro_f1"] >= 0.05  # it beats majority ...
    assert verdict["baselines"]["length"]["macro_f1"] > 0.9 and verdict["best"] == "length"  # ... not the rule
    assert verdict["activatable"] is False and verdict["code"] == "does_not_beat_baselines"
    assert verdict["headline"].startswith("beats majority") and verdict["headline"].endswith("but not the length rule")
    with pytest.raises(TrainingError) as info:
        registry.activate(version, alice)
    assert info.value.code == "does_not_beat_baselines" and "but not the length rule" in str(info.value)
    assert _active() == []
    registry.activate(version, alice, force=True)
    assert _active() == [version]


def test_a_clear_win_on_fewer_items_than_the_rule_states_is_refused(alice):
    run = engine.train(engine.create_run("test-logistic", {"device": "cpu", "seed": 1, "epochs": 6, "n": 100,
                                                           "separation": 4.0}).pk)
    verdict = run.model_version.metrics["verdict"]
    assert verdict["n"] == 20 < 50
    assert verdict["model"] - verdict["best_macro_f1"] >= 0.3 and verdict["interval"][0] > 0  # a clear win ...
    assert verdict["activatable"] is False and verdict["reasons"] == [
        {"code": "too_few_evaluation_items", "text": "too few evaluation items: 20 < 50"}]  # ... on too few items
    with pytest.raises(TrainingError, match="too few evaluation items: 20 < 50") as info:
        registry.activate(run.model_version, alice)
    assert info.value.code == "too_few_evaluation_items" and _active() == []


def test_the_rule_needs_the_interval_of_the_difference_above_zero():
    from modeling import verdicts

    y = [1, 0] * 30
    # Right on 36 of 60 items: 0.10 above chance on paper, an interval that reaches below zero.
    noisy = [t if n % 20 < 12 else 1 - t for n, t in enumerate(y)]
    verdict = verdicts.judge(y, noisy, {"majority": {"pred": [1] * 60}}, basis="test", where="a test")
    assert verdict["difference"] >= 0.05 and verdict["interval"][0] <= 0
    assert [r["code"] for r in verdict["reasons"]] == ["interval_includes_zero"] and not verdict["activatable"]


def test_an_older_majority_only_verdict_displays_and_needs_force(alice):
    from modeling import verdicts

    run = engine.train(engine.create_run("test-logistic", {"device": "cpu", "epochs": 2}).pk)
    old = {"beats_majority": True, "model": 0.8, "majority": 0.4, "margin": 0.05, "basis": "test",
           "text": "macro F1 0.800 against the majority class's 0.400 (chance 0.50) on the held-out split: beats majority"}
    ModelVersion.objects.filter(pk=run.model_version.pk).update(metrics={**run.model_version.metrics, "verdict": old})
    version = ModelVersion.objects.get(pk=run.model_version.pk)
    shown = verdicts.display(version.metrics)
    assert shown["status"] == "legacy" and shown["headline"] == "judged against the majority class only"
    assert shown["text"].startswith(old["text"]) and "before the baseline rule" in shown["text"]
    with pytest.raises(TrainingError) as info:
        registry.activate(version, alice)
    assert info.value.code == "not_judged_by_rule"
    registry.activate(version, alice, force=True)
