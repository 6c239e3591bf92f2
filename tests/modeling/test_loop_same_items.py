"""A learning loop's curve compares like with like: after three rounds every point (each round's version,
and the random arm) is scored on the same hold-out items, with a bootstrap interval; round 1 is named by how
its labels were chosen; the baselines are on those items; and an active version that the grown hold-out
shows below the activation rule is flagged, not silently active. Alice curates."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from modeling import fluency, registry
from modeling.loop import holdout, services
from modeling.loop.charts import curve_numbers
from modeling.loop.rounds import run_round
from modeling.models import LoopRound, ModelVersion
from modeling.verdicts import macro_f1

from .loop_helpers import make_pool_campaign, next_tasks, vote

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def pool(alice, django_user_model):
    return make_pool_campaign(alice, django_user_model, n=150, seed=3, name="same items")


def _round(loop, pool, votes: int, user) -> LoopRound:
    campaign, truth, raters = pool
    vote(campaign, truth, next_tasks(campaign, votes), raters)
    round_ = run_round(services.round_start(loop, user=user, enqueue=False).pk)
    assert round_.status == LoopRound.Status.DONE, round_.error
    return round_


def test_three_rounds_put_every_point_of_the_curve_on_the_same_items_with_an_interval(pool, alice, alice_client):
    loop = services.loop_create(campaign=pool[0], user=alice, config={"cv_folds": 0}, batch_size=20, min_holdout=5)
    first = _round(loop, pool, 50, alice)
    second = _round(loop, pool, 30, alice)
    third = _round(loop, pool, 30, alice)
    held = holdout.labelled(loop)
    assert third.holdout["n"] == len(held) > first.holdout["n"]  # the hold-out grew ...

    curve = third.holdout["curve"]
    assert [p["round"] for p in curve] == [1, 2, 3]
    assert {p["n"] for p in curve} == {len(held)}  # ... and every point is on the items it holds now
    y = [i["label"] for i in held]
    for point, round_ in zip(curve, (first, second, third)):
        probs = fluency.score([i["text"] for i in held], version=round_.version)
        assert point["macro_f1"] == round(macro_f1(y, [1 if p > 0.5 else 0 for p in probs]), 4)
        low, high = point["interval"]
        assert 0 <= low <= point["macro_f1"] <= high <= 1 and high - low > 0
    assert curve[0]["chosen_by"] == "campaign order (in selection order)"  # not "hybrid": no model chose them
    assert curve[1]["chosen_by"] == curve[2]["chosen_by"] == "hybrid"
    arm = third.holdout["random_arm"]
    assert arm["simulated"] and [p["labels"] for p in arm["points"]] == [first.labels_used, second.labels_used,
                                                                          third.labels_used]
    assert all(p["n"] == len(held) and p["interval"][0] <= p["macro_f1"] <= p["interval"][1] for p in arm["points"])
    assert set(third.holdout["baselines"]) == {"majority", "chance", "length", "wordfreq"}

    numbers = curve_numbers(list(loop.rounds.all()))
    assert numbers["same_items"] and numbers["n"] == len(held)
    assert [p["macro_f1"] for p in numbers["sampler"]] == [p["macro_f1"] for p in curve]
    body = alice_client.get(reverse("loop-detail", args=[loop.pk])).content.decode()
    assert f"Every point is scored on the same {len(held)} hold-out items" in body
    assert "labels chosen by campaign order (in selection order), then hybrid" in body
    assert body.count('data-role="interval"') == 3 and 'data-baseline="length"' in body
    assert "length rule (seed 004)" in body and "word-frequency rule" in body  # the flat lines' legend

    out = StringIO()
    call_command("loop", "show", str(loop.pk), stdout=out)
    assert f"every version on the same {len(held)} hold-out items, bootstrap 95% intervals" in out.getvalue()
    assert "labels chosen by campaign order (in selection order)" in out.getvalue()
    api = alice_client.get(f"/api/loop-rounds/{third.pk}/").json()
    assert api["holdout"]["curve"] == curve
    assert api["version_verdict"]["text"] == ModelVersion.objects.get(pk=third.version.pk).metrics["verdict"]["text"]


def test_a_version_activated_on_a_small_hold_out_is_flagged_when_the_grown_one_shows_it_below_the_rule(pool, alice):
    loop = services.loop_create(campaign=pool[0], user=alice, config={"cv_folds": 0}, batch_size=20, min_holdout=5)
    first = _round(loop, pool, 50, alice)
    assert not first.activated and "too few evaluation items" in first.decision  # the rule: >= 50 items
    v1 = registry.activate(first.version, alice, force=True)  # a curator insisted
    second = _round(loop, pool, 30, alice)
    v1 = ModelVersion.objects.get(pk=v1.pk)
    verdict = v1.metrics["verdict"]
    assert verdict["basis"] == "holdout" and verdict["n"] == second.holdout["n"] and not verdict["activatable"]
    assert v1.active and f"The active {v1} is flagged on the grown hold-out" in second.decision
    assert "replaces" in verdict  # the run's own verdict it replaced is kept beside it
    v2 = ModelVersion.objects.get(pk=second.version.pk)
    assert v2.metrics["verdict"]["text"] == second.holdout["verdict"]["text"]  # one verdict: the loop's
