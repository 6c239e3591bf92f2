"""Repeats: one config trained with seeds seed, seed+1, ... in one run group; mean ± sd of every metric;
two groups compared by the interval of their difference, "not distinguishable" when it holds zero.
Through the statistics, the CLI, the API, the new-run form, the group page and the compare page."""
import io
import statistics

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Campaign
from curation.models import Collection
from modeling import engine, groups
from modeling.models import TrainingRun

pytestmark = pytest.mark.django_db

CONFIG = {"device": "cpu", "epochs": 2, "seed": 3}


def _group(tiny, config=None, repeats=3, name=""):
    runs = groups.create_repeats("test-tiny", dict(config or CONFIG), repeats, name=name)
    return [engine.train(run.pk) for run in runs]


def test_three_seeds_give_mean_and_sd(tiny):
    runs = _group(tiny, name="tiny")
    assert [r.config["seed"] for r in runs] == [3, 4, 5]
    assert len({r.group for r in runs}) == 1 and runs[0].group.startswith("test-tiny-")
    assert [r.name for r in runs] == ["tiny (seed 3)", "tiny (seed 4)", "tiny (seed 5)"]
    assert all(r.status == TrainingRun.Status.DONE for r in runs)
    mse = [r.metrics["test_mse"] for r in runs]
    row = next(r for r in groups.group_summary(runs) if r["key"] == "test_mse")
    assert row["n"] == 3 and row["mean"] == pytest.approx(statistics.mean(mse))
    assert row["sd"] == pytest.approx(statistics.stdev(mse)) and row["sd"] > 0
    assert row["low"] < row["mean"] < row["high"]
    assert not any(r["key"] in ("best_epoch", "epochs_run") for r in groups.group_summary(runs))


def test_summarise_small_cases():
    assert groups.summarise([1.0, 2.0, 3.0]) == pytest.approx(
        {"n": 3, "mean": 2.0, "sd": 1.0, "low": 2.0 - 4.302653 / 3 ** 0.5, "high": 2.0 + 4.302653 / 3 ** 0.5})
    one = groups.summarise([0.5])
    assert one["sd"] == 0.0 and one["low"] is None


def test_two_identical_configs_are_not_distinguishable(tiny):
    a, b = _group(tiny), _group(tiny)
    result = groups.compare_groups(a, b)
    assert result["paired"] and result["rows"]
    assert {row["verdict"] for row in result["rows"]} == {"same"}


def test_noisy_groups_from_one_distribution_are_not_distinguishable_but_a_clear_gap_is():
    same = groups.difference([1.035, 0.674, 0.91], [0.98, 0.75, 0.83], paired=False)
    assert same["test"] == "Welch's t-test" and same["low"] < 0 < same["high"]
    assert groups.verdict("CIDEr", same) == "same"
    gap = groups.difference([1.30, 1.32, 1.29], [0.70, 0.72, 0.69], paired=False)
    assert groups.verdict("CIDEr", gap) == "better" and gap["p"] < 0.01
    assert groups.verdict("val_loss", gap) == "worse"  # lower is better for a loss
    assert groups.verdict("CIDEr", groups.difference([1.0], [0.5], paired=False)) == "unknown"


def test_paired_by_seed_index():
    paired = groups.difference([1.0, 0.8, 0.6], [0.9, 0.7, 0.5], paired=True)
    assert paired["test"] == "paired t-test over seeds" and paired["diff"] == pytest.approx(0.1)
    assert groups.verdict("CIDEr", paired) == "better"  # the same gain on every seed


def test_repeats_out_of_range_store_nothing(tiny):
    with pytest.raises(ValueError):
        groups.create_repeats("test-tiny", CONFIG, 0)
    with pytest.raises(ValueError):
        groups.create_repeats("test-tiny", CONFIG, groups.MAX_REPEATS + 1)
    assert not TrainingRun.objects.exists()


def test_cli_repeats_trains_a_group_and_prints_its_summary(tiny):
    out = io.StringIO()
    call_command("train", "test-tiny", "--device", "cpu", "--epochs", "2", "--seed", "7", "--repeats", "2",
                 stdout=out)
    runs = list(TrainingRun.objects.order_by("pk"))
    assert [r.config["seed"] for r in runs] == [7, 8] and runs[0].group == runs[1].group != ""
    text = out.getvalue()
    assert f"Run group {runs[0].group}: 2 runs, seeds 7–8." in text and "test_mse:" in text and "(n=2)" in text


def test_api_repeats_returns_the_group(alice_client, tiny, eager_celery, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post("/api/training-runs/", {"trainer": "test-tiny", "config": CONFIG, "repeats": 2},
                                     content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert [r["config"]["seed"] for r in body["runs"]] == [3, 4] and {r["group"] for r in body["runs"]} == {body["group"]}
    listed = alice_client.get("/api/training-runs/", {"group": body["group"]}).json()
    assert len(listed["results"] if isinstance(listed, dict) else listed) == 2
    bad = alice_client.post("/api/training-runs/", {"trainer": "test-tiny", "repeats": 0},
                            content_type="application/json")
    assert bad.status_code == 400


def test_form_repeats_redirects_to_the_group_page(alice_client, tiny, eager_celery,
                                                  django_capture_on_commit_callbacks):
    campaign = Campaign.objects.create(name="labels", kind="fluency", collection=Collection.objects.create(name="c"))
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("training-run-create"), {
            "trainer": "test-tiny", "campaign": campaign.pk, "epochs": "2", "seed": "1", "device": "cpu",
            "repeats": "3"})
    group = TrainingRun.objects.first().group
    assert response.status_code == 302 and response["Location"] == reverse("training-group-detail", args=[group])
    page = alice_client.get(response["Location"]).content.decode()
    assert "test_mse" in page and " ± " in page and page.count('class="badge status-done"') == 3
    bad = alice_client.post(reverse("training-run-create"), {"trainer": "test-tiny", "campaign": campaign.pk,
                                                             "device": "cpu", "repeats": "99"})
    assert bad.status_code == 400 and "A whole number from 1 to 20." in bad.content.decode()


def test_compare_page_says_not_distinguishable_and_bolds_nothing(alice_client, tiny):
    a, b = _group(tiny), _group(tiny)
    page = alice_client.get(reverse("training-compare"), {"group_a": a[0].group, "group_b": b[0].group})
    body = page.content.decode()
    assert page.status_code == 200
    table = body.split('class="table compact compare-groups"')[1].split("</table>")[0]
    assert "A is not distinguishable from B" in table and "<strong>" not in table
    assert "paired by seed" in body
    missing = alice_client.get(reverse("training-compare"), {"group_a": a[0].group, "group_b": "nope"})
    assert "No run group &#x27;nope&#x27;." in missing.content.decode()
    assert alice_client.get(reverse("training-group-detail", args=["nope"])).status_code == 404
