"""Issue 6's "done when", in a real browser (Debian chromium through Playwright, live server, eager Celery).

Alice (curator) trains a fluency classifier from a finished fluency campaign (two raters' consistent
votes over real caption sentences and their scrambled versions), reads its metrics next to the seed's
baselines, activates it, re-runs a pipeline with the "fluency" filter and sees scores where the first
run said "na", trains two captioners with two strategies (all captions; weighted loss, whose fluency
scores come from the classifier she just activated) on a frozen release of generated images, compares
them on the metrics page, and launches a relevance+fluency campaign over their outputs. Hyper-parameters
are tiny and typed into the form, so every run trains in seconds on a CPU. Screenshots go under
the test's tmp_path (the ``shot`` fixture).
"""
import json
import os
import random
import re

import pytest
from django.contrib.auth.models import Group
from django.db import connections

from annotation.aggregation import aggregate_campaign
from annotation.models import Campaign, Task
from captionlab import roles
from curation.models import Caption, Collection, FilterDecision, FilterRun
from modeling import registry
from modeling.models import ModelVersion, TrainingRun

from .curation.release_helpers import add_caption, add_image
from .curation.test_fluency_filter import make_fluency_campaign, run_pipeline, scramble
from .modeling.test_captioning import tiny_release
from .test_browser import CHROMIUM, log_in

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # see test_browser.py

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

TRAINING = 120_000  # ms: eager Celery trains inside the request, so the redirect waits for the run

# Sentences the classifier never saw, and their scrambled versions, for the pipeline run.
TO_FILTER = ["a brown dog is running in the park", "a man is sitting on a bench by the river",
             "a girl rides a horse on the beach"]

FLUENCY_FORM = {"epochs": "12", "batch_size": "16", "lr": "0.01", "seed": "3"}
FLUENCY_EXTRA = {"embedding": 32, "hidden": 32, "dropout": 0.2, "test_fraction": 0.25, "val_fraction": 0.0,
                 "min_labels": 20}
CAPTIONER_FORM = {"epochs": "15", "batch_size": "16", "lr": "0.01", "seed": "1"}
CAPTIONER_EXTRA = {"min_count": 1, "min_train_captions": 1, "min_vocabulary": 1, "image_size": 16, "feature_dim": 32, "width": 8, "embed": 32, "hidden": 32,
                   "dropout": 0.0, "heads": 2, "layers": 1, "beam_size": 4}


@pytest.fixture
def setup(transactional_db, django_user_model, settings, eager_celery):
    # Everything in the database before the browser starts (see the browser fixture's note).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    registry.clear_cache()
    alice = django_user_model.objects.create_user(username="alice", password="alice-pw-123")
    alice.groups.add(Group.objects.get_or_create(name=roles.CURATOR)[0])

    # A finished fluency campaign, aggregated: 80 fluent + 80 scrambled sentences with two agreeing
    # votes each, plus 2 "difficult" and 2 disagreeing items that the consistent rule leaves out.
    campaign, _ = make_fluency_campaign(alice, django_user_model, name="fluency labels")
    Campaign.objects.filter(pk=campaign.pk).update(status="finished")
    aggregate_campaign(campaign.pk)

    # Captions to filter, with real image files, and a first pipeline run before any model exists.
    collection = Collection.objects.create(name="Captions to filter", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    rng = random.Random(11)
    for n, text in enumerate(TO_FILTER + [scramble(s, rng) for s in TO_FILTER]):
        add_caption(add_image(collection, seed=100 + n, external_id=f"tf-{n}"), text)
    first_run, decided = run_pipeline(collection)
    assert {(d.outcome, d.reason) for d in decided.values()} == {("na", "no_fluency_model")}
    first_run.pipeline.name = "Fluency check"
    first_run.pipeline.save(update_fields=["name"])

    # A frozen release: 6 generated solid-colour images, two captions each, half of them held out.
    release, _, _ = tiny_release(name="Colour squares", n=6, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    return {"campaign": campaign, "collection": collection, "first_run": first_run, "release": release}


def test_a_curator_trains_activates_filters_trains_captioners_compares_and_launches_an_evaluation(
        setup, live_server, page, shot):
    try:
        walk_through(setup, live_server, page, shot)
    finally:
        # ORM calls ran while Playwright's loop was running: close that connection (see test_release_browser).
        connections.close_all()


def new_run(page, trainer: str, name: str, fields: dict, extra: dict, *, campaign=None, release=None,
            strategy=None) -> TrainingRun:
    page.click("nav.subnav >> text=New run")
    page.wait_for_url("**/models/runs/new/")
    page.fill("input[name=name]", name)
    page.check(f"input[name=trainer][value='{trainer}']")
    if campaign is not None:
        page.select_option("select[name=campaign]", str(campaign.pk))
    if release is not None:
        page.select_option("select[name=release]", str(release.pk))
    if strategy:
        page.select_option("select[name=strategy]", strategy)
    for field, value in fields.items():
        page.fill(f"input[name={field}]", value)
    page.select_option("select[name=device]", "cpu")
    page.fill("textarea[name=extra]", json.dumps(extra))
    page.click("button:has-text('Queue the run')", no_wait_after=True)
    page.wait_for_url(re.compile(r".*/models/runs/\d+/$"), timeout=TRAINING)
    run = TrainingRun.objects.get(name=name)
    assert page.url.endswith(f"/models/runs/{run.pk}/")
    # Eager Celery finished it before the redirect; on a real worker the card polls until it is done.
    page.wait_for_selector('#training-progress[data-status="done"]', timeout=TRAINING)
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.DONE, run.error
    assert page.locator("#training-progress [data-role=status]").inner_text() == "Done"
    assert page.locator("#training-progress svg.loss-curve polyline").count() == 1
    return run


def metric_rows(page) -> dict:
    rows = page.locator("section.card:has(h2:text-is('Metrics')) tr")
    return {rows.nth(i).locator("th").inner_text(): rows.nth(i).locator("td").inner_text()
            for i in range(rows.count())}


def walk_through(setup, live_server, page, shot):
    campaign, release = setup["campaign"], setup["release"]
    log_in(page, live_server, "alice")
    page.click("nav >> text=Models")
    page.wait_for_url("**/models/runs/")

    # (1) The fluency classifier from the campaign's consistent votes, tiny settings from the form.
    fluency = new_run(page, "fluency-lstm4", "fluency from labels", FLUENCY_FORM, FLUENCY_EXTRA, campaign=campaign)
    assert fluency.config["embedding"] == 32 and fluency.config["epochs"] == 12 and fluency.config["device"] == "cpu"
    assert fluency.data_summary["labels"] == {"fluent": 80, "not_fluent": 80}
    metrics = metric_rows(page)
    for key in ("precision", "recall", "f1", "accuracy", "n_test"):
        assert key in metrics, sorted(metrics)
    assert float(metrics["f1"]) == pytest.approx(fluency.metrics["f1"], abs=1e-4) and metrics["n_test"] == "40"
    # Precision, recall and F1 next to the seed's baselines (Table 2), on the same held-out items.
    baselines = page.locator("#baselines table")
    assert baselines.locator("thead th").all_inner_texts()[1:] == ["PRECISION", "RECALL", "F1", "ACCURACY"]
    shown = {}
    for row in ("classifier", "random_guess", "length_rated"):
        cells = baselines.locator(f'tr[data-row="{row}"] td').all_inner_texts()
        shown[row] = [float(c) for c in cells]
    expected = {"classifier": fluency.metrics, **fluency.metrics["baselines"]}
    for row, values in shown.items():
        assert values == [pytest.approx(expected[row][k], abs=1e-3) for k in ("precision", "recall", "f1", "accuracy")]
    assert shown["random_guess"] == [0.5, 0.5, 0.5, 0.5]
    assert shown["classifier"][3] > shown["random_guess"][3]  # it learned something the coin does not
    # The run says which branches it left out (English captions without source texts).
    assert "Source words and source POS branches left out" in page.locator("pre.log").inner_text()
    shot(page, "run")

    # (2) Activate the version from the run page; the registry marks it active.
    version = ModelVersion.objects.get(run=fluency)
    assert not version.active
    page.click("section.card:has(h2:text-is('Model version')) button:has-text('Activate')")
    page.wait_for_url("**/models/")
    version.refresh_from_db()
    assert version.active and version.activated_by.username == "alice"
    assert page.locator(".alert, .messages").filter(has_text="is now the active").count() >= 1
    active = page.locator("tr.is-active")
    assert active.count() == 1 and active.locator("td").first.inner_text() == f"v{version.version}"
    assert "by alice" in active.inner_text()
    shot(page, "registry")

    # (3) Re-run the pipeline with the fluency filter: scores now, not "na".
    first_run = setup["first_run"]
    page.click("nav >> text=Pipelines")
    page.click("text=Fluency check")
    page.wait_for_url(f"**/pipelines/{first_run.pipeline_id}/")
    page.select_option("#run-collection", label="Captions to filter")
    page.click("button:has-text('Start run')", no_wait_after=True)
    page.wait_for_url(re.compile(r".*/runs/\d+/$"), timeout=60_000)
    second = FilterRun.objects.exclude(pk=first_run.pk).get(pipeline_id=first_run.pipeline_id)
    assert page.url.endswith(f"/runs/{second.pk}/")
    page.wait_for_selector('#run-progress progress[value="100"]', timeout=60_000)
    decisions = list(FilterDecision.objects.filter(run=second, step=0).select_related("caption"))
    assert len(decisions) == 6
    assert all(d.score is not None and 0 <= d.score <= 1 for d in decisions)
    assert all((d.outcome, d.reason) in {("keep", "fluent"), ("drop", "not_fluent")} for d in decisions)
    assert all(d.details["model_version"] == version.version for d in decisions)
    page.goto(f"{live_server.url}/runs/{second.pk}/steps/0/?tab=keep")
    tab = lambda name: page.locator(f'#outcome-tabs a[data-tab="{name}"] [data-role=count]').inner_text()  # noqa: E731
    assert tab("na") == "0"
    assert int(tab("keep")) + int(tab("drop")) == 6
    shown = {}
    for outcome in ("keep", "drop"):
        page.goto(f"{live_server.url}/runs/{second.pk}/steps/0/?tab={outcome}")
        rows = page.locator(".decision")
        for i in range(rows.count()):
            text = rows.nth(i).locator(".caption-text").inner_text()
            shown[text] = (rows.nth(i).locator("[data-role=score]").inner_text(),
                           rows.nth(i).locator("[data-role=reason]").inner_text())
    by_text = {d.caption.text: d for d in decisions}
    assert set(shown) == set(by_text)
    for text, (score_text, reason) in shown.items():
        assert score_text != "—" and float(score_text) == pytest.approx(by_text[text].score, abs=1e-3)
        assert reason == by_text[text].reason
    # The first run, made before the model existed, still says "na" for every caption.
    page.goto(f"{live_server.url}/runs/{first_run.pk}/steps/0/?tab=na")
    assert tab("na") == "6"
    assert set(page.locator(".decision [data-role=reason]").all_inner_texts()) == {"no_fluency_model"}
    shot(page, "pipeline-first-run")

    # (4) Two captioners with two strategies on the frozen release.
    page.goto(f"{live_server.url}/models/runs/")
    plain = new_run(page, "captioner-lstm", "lstm all captions", CAPTIONER_FORM, CAPTIONER_EXTRA,
                    release=release, strategy="all")
    assert {"BLEU-1", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "diversity.vocabulary"} <= set(metric_rows(page))
    # The run shows what it generated for the held-out images, next to their references.
    samples = page.locator("#samples tbody tr")
    assert samples.count() == 3 and samples.first.locator("td.generated").inner_text() == \
        (plain.metrics["extras"]["samples"][0]["text"] or "(empty)")
    weighted = new_run(page, "captioner-transformer", "transformer weighted loss", CAPTIONER_FORM, CAPTIONER_EXTRA,
                       release=release, strategy="weighted_loss")
    # Seed 004's weighted loss needs a fluency score per caption: the active classifier gave them.
    notes = weighted.data_summary["notes"]
    assert any("fluency score(s) from the active fluency classifier" in n for n in notes), notes
    assert "from the active fluency classifier" in page.locator("section.card:has(h2:text-is('Data and config'))").inner_text()
    assert (plain.config["strategy"], weighted.config["strategy"]) == ("all", "weighted_loss")
    assert plain.release_id == weighted.release_id == release.pk and plain.data_hash and weighted.data_hash
    shot(page, "captioner-run")

    # (5) Compare them side by side: the metrics table and the bar chart.
    page.click("nav.subnav >> text=Compare")
    page.wait_for_url("**/models/compare/")
    picker = page.locator("form[method=get]")
    for run in (plain, weighted):
        picker.locator(f"input[name=runs][value='{run.pk}']").check()
    assert not picker.locator(f"input[name=runs][value='{fluency.pk}']").is_checked()
    picker.locator("button:has-text('Compare')").click()
    page.wait_for_url(re.compile(r".*/models/compare/\?runs=\d+&runs=\d+$"))
    # The picker lists the newest run first; the table follows the order of the query.
    order = [plain, weighted] if page.url.endswith(f"runs={weighted.pk}") else [weighted, plain]
    assert sorted(r.pk for r in order) == [plain.pk, weighted.pk]
    assert page.locator("svg.metric-bars").is_visible()
    assert page.locator("svg.metric-bars rect").count() >= 2
    table = page.locator("table.compare")
    assert table.is_visible()
    heads = table.locator("thead th").all_text_contents()[1:]  # text_content: the head is upper-cased by CSS
    assert [table.locator(f"thead th:nth-child({i + 2}) a").text_content() for i in range(2)] == \
        [f"#{r.pk}" for r in order]
    assert "weighted_loss" in heads[order.index(weighted)] and "all" in heads[order.index(plain)]
    for key in ("BLEU-1", "BLEU-4", "ROUGE-L", "CIDEr", "diversity.vocabulary"):
        row = table.locator(f"tbody tr:has(th:text-is('{key}'))")
        assert row.count() == 1, key
        cells = row.locator("td").all_inner_texts()
        assert len(cells) == 2 and all(c != "—" for c in cells), (key, cells)
    bleu = table.locator("tbody tr:has(th:text-is('BLEU-1')) td").all_inner_texts()
    assert [float(v) for v in bleu] == [pytest.approx(r.metrics["BLEU-1"], abs=1e-4) for r in order]
    shot(page, "compare")

    # (6) A relevance+fluency campaign over both runs' generated captions, from the compare page.
    form = page.locator("form:has(button:has-text('Create the campaign'))")
    assert form.locator("input[name=runs]:checked").count() == 2
    form.locator("select[name=eval_kind]").select_option("relevance_fluency")
    form.locator("input[name=name]").fill("Captioners side by side")
    assert form.locator("input[name=rerank]").is_enabled()  # a fluency classifier is active
    form.locator("button:has-text('Create the campaign')").click(no_wait_after=True)
    # The captions are generated by a job (eagerly here, so it is done when its page shows); its
    # progress card links to the campaign.
    page.wait_for_url(re.compile(r".*/models/generation/\d+/$"), timeout=TRAINING)
    assert page.locator(".alert, .messages").filter(has_text="Generating the captions of 2 run(s)").count() >= 1
    card = page.locator("#generation-progress")
    assert card.get_attribute("data-status") == "done" and card.locator("progress").get_attribute("value") == "100"
    shot(page, "generation-job")
    card.locator("[data-role=result] a").click()
    page.wait_for_url(re.compile(r".*/campaigns/\d+/$"))
    evaluation = Campaign.objects.get(name="Captioners side by side")
    assert page.url.endswith(f"/campaigns/{evaluation.pk}/")
    assert evaluation.kind == "relevance_fluency" and sorted(evaluation.selection["runs"]) == [plain.pk, weighted.pk]
    tasks = list(Task.objects.filter(campaign=evaluation))
    test_images = set(release.items.filter(split="test").values_list("image_id", flat=True))
    assert tasks and {t.image_id for t in tasks} <= test_images
    sources = {f"model captioner v{r.model_version.version}" for r in (plain, weighted)}
    for task in tasks:
        captions = Caption.objects.filter(pk__in=task.candidates)
        assert len(task.candidates) == 2 and {c.origin for c in captions} == {"model"}
        assert {c.source for c in captions} == sources  # one candidate from each run
    assert page.locator("[data-role=tasks-done]").inner_text() == f"0 of {len(tasks)}"
    shot(page, "campaign")
