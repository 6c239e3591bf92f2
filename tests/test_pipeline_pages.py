"""The curator review pages of the curation pipeline: pipelines and their editor, a run's progress
and funnel, a step's decisions with overrides, and the score histogram with its what-if counts.

Small test filters (registered below, as tests/curation/test_executor.py does) stand in for the
real ones, and the run is executed synchronously (executor.start + executor.run_chunk), so these
tests need neither spaCy nor a worker.
"""
import re

import pytest
from django.urls import reverse

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, Review, RunChunk
from curation.pipeline import executor, registry
from curation.pipeline.base import Decision, Filter, drop, keep
from curation.services import run_create

pytestmark = pytest.mark.django_db


class WideEnough(Filter):
    name, label, target = "test_pp_width", "Wide enough", "image"
    description = "Keeps images at least min_width pixels wide. Score: the width."
    defaults = {"min_width": 100}

    def apply(self, items):
        return [keep("wide", it.width) if (it.width or 0) >= self.params["min_width"] else drop("too_narrow", it.width)
                for it in items]


class CropStock(Filter):
    """A transform that says which characters it removed (details["removed_spans"])."""

    name, label, is_transform = "test_pp_crop", "Crop boilerplate", True
    description = "Removes stock-photo boilerplate from the text."
    defaults = {"patterns": ["stock photo "]}

    def apply(self, items):
        out = []
        for it in items:
            for pattern in self.params["patterns"]:
                at = it.text.find(pattern)
                if at >= 0:
                    out.append(Decision("keep", "cropped", None, {"removed_spans": [[at, at + len(pattern)]]},
                                        it.text[:at] + it.text[at + len(pattern):]))
                    break
            else:
                out.append(keep("unchanged"))
        return out


class Hypernyms(Filter):
    """A transform without spans: the page falls back to a word diff."""

    name, label, is_transform = "test_pp_hyper", "Hypernyms", True
    description = "Replaces names with their hypernyms."
    defaults = {"mapping": {"Harrison Ford": "actor"}, "lowercase": False}

    def apply(self, items):
        out = []
        for it in items:
            text = it.text
            for name, hypernym in self.params["mapping"].items():
                text = text.replace(name, hypernym)
            out.append(Decision("keep", "hypernymized", None, {}, text) if text != it.text else keep("unchanged"))
        return out


class WordCount(Filter):
    name, label = "test_pp_words", "Word count"
    description = "Keeps captions of min_words to max_words words. Score: the number of words."
    defaults = {"min_words": 3, "max_words": 8}
    score_thresholds = ("min_words", "max_words")

    def apply(self, items):
        out = []
        for it in items:
            n = len(it.text.split())
            if n < self.params["min_words"]:
                out.append(drop("too_short", n))
            elif n > self.params["max_words"]:
                out.append(drop("too_long", n))
            else:
                out.append(keep("ok", n, words=n))
        return out


class Explodes(Filter):
    name, label = "test_pp_explode", "Explodes"
    defaults = {}

    def apply(self, items):
        if any("premiere" in it.text for it in items):
            raise RuntimeError("cannot parse the premiere")
        return [keep() for _ in items]


for cls in (WideEnough, CropStock, Hypernyms, WordCount, Explodes):
    registry.FILTERS.setdefault(cls.name, cls)

STEPS = [{"filter": "test_pp_width"}, {"filter": "test_pp_crop"}, {"filter": "test_pp_hyper"},
         {"filter": "test_pp_words"}]
WORDS = 3  # the step of test_pp_words
SCRIPT = "<script>alert(1)</script> a cat on a sofa"
IMAGES = [  # (width, captions)
    (300, ["stock photo a dog on a beach", "Harrison Ford at the premiere in Paris"]),
    (50, ["a narrow picture of a tower"]),
    (300, ["dog", SCRIPT]),
    (400, ["a very long caption that goes on and on about nothing at all", "two cats"]),
    (320, ["a red bus on a street"]),
]


def make_collection(name="Review photos", images=IMAGES) -> Collection:
    collection = Collection.objects.create(name=name)
    for i, (width, texts) in enumerate(images):
        image = Image.objects.create(collection=collection, external_id=f"{name[:4]}-{i}", width=width, height=200,
                                     format="JPEG", sha256=f"{name}-{i}".encode().hex()[:64].ljust(64, "0"),
                                     status="ready")
        for text in texts:
            Caption.objects.create(image=image, text=text, origin="alt_text")
    return collection


def execute(run: FilterRun) -> FilterRun:
    """What the Celery tasks do, in this thread: split into chunks, run each, finish."""
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    for chunk in RunChunk.objects.filter(run=run).order_by("index"):
        try:
            executor.run_chunk(run.pk, chunk.index)
        except Exception as exc:  # what the task does once its retries are spent  # noqa: BLE001
            executor.chunk_failed(run.pk, chunk.index, f"{type(exc).__name__}: {exc}")
    run.refresh_from_db()
    return run


def make_run(collection, steps=STEPS, user=None, name=None) -> FilterRun:
    pipeline = Pipeline.objects.create(name=name or f"review-{Pipeline.objects.count()}", steps=steps)
    return execute(run_create(collection=collection, pipeline=pipeline, user=user, enqueue=False))


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """The personas' passwords are hashed with a fast hasher: these tests are about pages."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def collection(db):
    return make_collection()


@pytest.fixture
def run(collection, alice):
    return make_run(collection, user=alice)


def decision(run, text, step=WORDS) -> FilterDecision:
    return FilterDecision.objects.get(run=run, step=step, caption__text=text)


def funnel(run, step):
    run.refresh_from_db()
    return run.funnel[step]


def rows_of(html: str) -> list[str]:
    return re.findall(r'<article class="decision[^"]*" id="decision-(\d+)"', html)


# --- Who may open what ----------------------------------------------------------------------------


def page_urls(run):
    return [
        reverse("pipeline-list"), reverse("pipeline-detail", args=[run.pipeline.pk]), reverse("run-list"),
        reverse("run-detail", args=[run.pk]), reverse("run-progress", args=[run.pk]),
        reverse("run-step", args=[run.pk, WORDS]), reverse("run-step-histogram", args=[run.pk, WORDS]),
    ]


def test_every_page_renders_for_a_curator(alice_client, run):
    for url in page_urls(run):
        assert alice_client.get(url).status_code == 200, url


def test_pages_that_also_answer_htmx_vary_on_the_hx_request_header(alice_client, run):
    for url in page_urls(run)[3:] + [reverse("pipeline-detail", args=[run.pipeline.pk])]:
        if not url.endswith("progress"):
            assert "HX-Request" in alice_client.get(url).get("Vary", ""), url


def test_an_annotator_gets_403_on_every_page_and_every_form(bob_client, run):
    for url in page_urls(run):
        assert bob_client.get(url).status_code == 403, url
    d = decision(run, "dog")
    posts = [
        (reverse("decision-override", args=[d.pk]), {"outcome": "keep"}),
        (reverse("run-step-overrides", args=[run.pk, WORDS]), {"outcome": "keep", "ids": [d.pk]}),
        (reverse("pipeline-detail", args=[run.pipeline.pk]), {"op": "save", "name": "x", "step-count": "0"}),
        (reverse("pipeline-run", args=[run.pipeline.pk]), {"collection": run.collection.pk}),
        (reverse("pipeline-list"), {"name": "mine", "filter": "test_pp_words"}),
    ]
    for url, data in posts:
        assert bob_client.post(url, data).status_code == 403, url
    d.refresh_from_db()
    assert d.override == "" and not Review.objects.exists()
    assert not Pipeline.objects.filter(name="mine").exists()


def test_anonymous_visitors_are_sent_to_the_login_page(client, run):
    response = client.get(reverse("run-detail", args=[run.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_navigation_links_to_pipelines_and_runs_for_curators_only(client, alice, bob, run):
    client.force_login(alice)
    html = client.get(reverse("home")).content.decode()
    assert 'href="/pipelines/"' in html and 'href="/runs/"' in html
    client.force_login(bob)
    html = client.get(reverse("home")).content.decode()
    assert 'href="/pipelines/"' not in html


# --- Pipelines and the editor ---------------------------------------------------------------------


def test_the_pipeline_list_shows_the_seed_presets(alice_client):
    html = alice_client.get(reverse("pipeline-list")).content.decode()
    for name in ("conceptual-captions", "ava-captions", "museum-seeds"):
        assert name in html
    assert Pipeline.objects.filter(preset="conceptual-captions").exists()


def test_a_new_pipeline_starts_with_one_step_and_opens_in_the_editor(alice_client):
    response = alice_client.post(reverse("pipeline-list"), {"name": "my words", "filter": "test_pp_words"})
    pipeline = Pipeline.objects.get(name="my words")
    assert response.status_code == 302 and response["Location"] == pipeline.get_absolute_url()
    assert pipeline.steps == [{"filter": "test_pp_words"}]
    again = alice_client.post(reverse("pipeline-list"), {"name": "my words", "filter": "test_pp_words"})
    assert again.status_code == 400 and "already exists" in again.content.decode()


def editor_post(pipeline, **changes) -> dict:
    """The editor form as the browser sends it for the pipeline's stored steps."""
    data = {"name": pipeline.name, "description": pipeline.description, "step-count": str(len(pipeline.steps))}
    for i, step in enumerate(pipeline.steps):
        cls = registry.get(step["filter"])
        data[f"step-{i}-filter"] = step["filter"]
        data[f"step-{i}-enabled"] = "on"
        params = {**cls.defaults, **(step.get("params") or {})}
        for key, value in params.items():
            if isinstance(value, bool):
                if value:
                    data[f"step-{i}-{key}"] = "on"
            elif isinstance(value, list):
                data[f"step-{i}-{key}"] = "\n".join(map(str, value))
            elif isinstance(value, dict):
                import json

                data[f"step-{i}-{key}"] = json.dumps(value)
            else:
                data[f"step-{i}-{key}"] = str(value)
    data.update(changes)
    return data


def test_the_editor_shows_each_step_with_its_label_description_and_typed_inputs(alice_client, run):
    html = alice_client.get(reverse("pipeline-detail", args=[run.pipeline.pk])).content.decode()
    assert "Word count" in html and "Keeps captions of min_words to max_words words" in html
    assert re.search(r'<input type="number" step="1" id="step-3-min_words" name="step-3-min_words" value="3">', html)
    assert re.search(r'<textarea id="step-1-patterns" name="step-1-patterns"[^>]*>stock photo </textarea>', html)
    assert 'name="step-2-mapping"' in html and "Harrison Ford" in html  # a dict as JSON
    assert re.search(r'<input type="checkbox" name="step-2-lowercase" id="step-2-lowercase">', html)


def test_the_editor_saves_valid_parameters_and_only_what_differs_from_the_defaults(alice_client, run):
    pipeline = run.pipeline
    data = editor_post(pipeline, **{"step-3-min_words": "2", "step-1-patterns": "stock photo \nfile photo ",
                                    "step-2-lowercase": "on", "step-2-mapping": '{"Paris": "city"}'})
    response = alice_client.post(reverse("pipeline-detail", args=[pipeline.pk]), {**data, "op": "save"})
    assert response.status_code == 302
    pipeline.refresh_from_db()
    assert pipeline.steps[0] == {"filter": "test_pp_width"}
    assert pipeline.steps[1]["params"] == {"patterns": ["stock photo ", "file photo "]}  # spaces kept
    assert pipeline.steps[2]["params"] == {"mapping": {"Paris": "city"}, "lowercase": True}
    assert pipeline.steps[3]["params"] == {"min_words": 2}


def test_the_editor_shows_an_error_for_invalid_parameters_and_saves_nothing(alice_client, run):
    pipeline = run.pipeline
    before = list(pipeline.steps)
    data = editor_post(pipeline, **{"step-3-min_words": "three", "step-2-mapping": "{not json", "op": "save"})
    response = alice_client.post(reverse("pipeline-detail", args=[pipeline.pk]), data)
    html = response.content.decode()
    assert response.status_code == 400
    assert "Enter a whole number." in html and "Not valid JSON" in html
    assert 'value="three"' in html  # what the curator typed stays in the field
    pipeline.refresh_from_db()
    assert pipeline.steps == before


def test_errors_of_pipeline_save_are_shown_in_the_editor(alice_client, run):
    Pipeline.objects.create(name="taken", steps=[{"filter": "test_pp_words"}])
    data = editor_post(run.pipeline, name="taken", op="save")
    response = alice_client.post(reverse("pipeline-detail", args=[run.pipeline.pk]), data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200  # htmx swaps 2xx answers only
    assert "already exists" in response.content.decode()
    assert 'id="pipeline-editor"' in response.content.decode() and "<html" not in response.content.decode()


def test_steps_are_added_moved_and_removed_before_saving(alice_client, run):
    pipeline = run.pipeline
    url = reverse("pipeline-detail", args=[pipeline.pk])
    data = editor_post(pipeline, op="add", new_filter="test_pp_explode")
    html = alice_client.post(url, data, HTTP_HX_REQUEST="true").content.decode()
    assert 'name="step-4-filter" value="test_pp_explode"' in html and "Unsaved changes" in html
    pipeline.refresh_from_db()
    assert len(pipeline.steps) == 4  # nothing saved yet
    data = editor_post(pipeline, op="up:3")
    html = alice_client.post(url, data).content.decode()
    assert html.index('value="test_pp_words"') < html.index('value="test_pp_hyper"')
    data = editor_post(pipeline, op="remove:0")
    data.pop("step-0-filter")
    for key in [k for k in data if k.startswith("step-0-")]:
        data.pop(key)
    assert alice_client.post(url, {**data, "op": "save"}).status_code == 302
    pipeline.refresh_from_db()
    assert [s["filter"] for s in pipeline.steps] == ["test_pp_crop", "test_pp_hyper", "test_pp_words"]


def test_a_step_can_be_switched_off_and_saved_as_a_new_pipeline(alice_client, run):
    data = editor_post(run.pipeline, op="save_new", new_name="without crop")
    data.pop("step-1-enabled")
    response = alice_client.post(reverse("pipeline-detail", args=[run.pipeline.pk]), data, HTTP_HX_REQUEST="true")
    copy = Pipeline.objects.get(name="without crop")
    assert response.status_code == 200 and response["HX-Redirect"] == copy.get_absolute_url()
    assert copy.steps[1] == {"filter": "test_pp_crop", "enabled": False}
    assert copy.created_by.username == "alice"


def test_running_a_pipeline_on_a_collection_opens_the_run_page(alice_client, collection, eager_celery,
                                                                django_capture_on_commit_callbacks):
    pipeline = Pipeline.objects.create(name="words only", steps=[{"filter": "test_pp_words"}])
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("pipeline-run", args=[pipeline.pk]), {"collection": collection.pk})
    run = FilterRun.objects.get(pipeline=pipeline)
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    run.refresh_from_db()
    assert run.status == "done" and run.created_by.username == "alice"
    assert "funnel-chart" in alice_client.get(response["Location"]).content.decode()


def test_running_without_a_collection_says_so(alice_client):
    pipeline = Pipeline.objects.create(name="words only", steps=[{"filter": "test_pp_words"}])
    response = alice_client.post(reverse("pipeline-run", args=[pipeline.pk]), {"collection": ""})
    assert response.status_code == 400 and "Choose a collection" in response.content.decode()
    assert not FilterRun.objects.exists()


def test_a_pipeline_that_cannot_run_says_why_and_starts_nothing(alice_client, collection):
    pipeline = Pipeline.objects.create(name="broken", steps=[{"filter": "no_such_filter"}])
    response = alice_client.post(reverse("pipeline-run", args=[pipeline.pk]), {"collection": collection.pk})
    assert response.status_code == 400 and "unknown filter" in response.content.decode()
    assert not FilterRun.objects.exists()
    # The editor still opens, with the parameters of the missing filter as JSON.
    html = alice_client.get(reverse("pipeline-detail", args=[pipeline.pk])).content.decode()
    assert "not installed" in html and 'name="step-0-params"' in html


# --- The run page -------------------------------------------------------------------------------


def test_the_run_page_draws_the_funnel_with_the_counts_and_percentages(alice_client, run):
    html = alice_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert '<svg class="chart funnel-chart"' in html
    # Images: 5 entered the width step, 1 dropped (20 %). Captions: 7 entered, 3 dropped by the word count.
    assert 'data-step="0" data-entered="5" data-kept="4" data-dropped="1" data-na="0"' in html
    assert 'data-step="3" data-entered="7" data-kept="4" data-dropped="3" data-na="0"' in html
    table = html[html.index('<tr data-step="3">'):]
    assert re.search(r'data-role="dropped">3 <span class="pct">42\.9%</span>', table)
    assert re.search(r'data-role="left"><strong>4</strong> <span class="pct">57\.1%</span>', table)
    first = html[html.index('<tr data-step="0">'):]
    assert re.search(r'data-role="dropped">1 <span class="pct">20\.0%</span>', first)
    assert reverse("run-step", args=[run.pk, WORDS]) in html  # bars and rows link to the decisions
    assert "Snapshot" in html and "test_pp_words" in html


def test_the_run_page_lists_failed_chunks_with_their_errors(alice_client, collection, monkeypatch):
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 2)
    run = make_run(collection, steps=STEPS + [{"filter": "test_pp_explode"}])
    assert run.chunks_failed == 1
    html = alice_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Failed chunks" in html and "cannot parse the premiere" in html


def test_the_progress_fragment_polls_while_the_run_goes_on_then_stops(alice_client, collection):
    pipeline = Pipeline.objects.create(name="words only", steps=[{"filter": "test_pp_words"}])
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    url = reverse("run-progress", args=[run.pk])
    running = alice_client.get(url, HTTP_HX_REQUEST="true")
    html = running.content.decode()
    assert 'hx-trigger="every 1s"' in html and "HX-Trigger" not in running
    assert "<html" not in html and 'data-role="chunks">0 <span class="muted">of 1</span>' in html
    page = alice_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "The funnel appears here when the run has finished" in page
    executor.run_chunk(run.pk, 0)
    done = alice_client.get(url, HTTP_HX_REQUEST="true")
    assert 'hx-trigger="every 1s"' not in done.content.decode()
    assert done["HX-Trigger"] == "run-finished"
    assert 'value="100"' in done.content.decode()
    results = alice_client.get(reverse("run-detail", args=[run.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert results.lstrip().startswith("<section id=\"run-results\"") or 'id="run-results"' in results[:400]
    assert "funnel-chart" in results and "<html" not in results


def test_the_run_list_shows_runs_and_filters_by_pipeline(alice_client, run, collection):
    other = make_run(make_collection("Other photos"), name="other pipeline")
    html = alice_client.get(reverse("run-list")).content.decode()
    assert f"#{run.pk}" in html and f"#{other.pk}" in html
    html = alice_client.get(reverse("run-list") + f"?pipeline={other.pipeline.pk}").content.decode()
    assert f'href="/runs/{other.pk}/"' in html and f'href="/runs/{run.pk}/"' not in html


# --- A step's decisions ---------------------------------------------------------------------------


def test_the_step_page_shows_dropped_decisions_with_reason_chips(alice_client, run):
    html = alice_client.get(reverse("run-step", args=[run.pk, WORDS])).content.decode()
    assert len(rows_of(html)) == 3  # the default tab: dropped
    assert re.search(r'data-reason="too_short"[^>]*><code>too_short</code> <span class="count">2</span>', html)
    assert re.search(r'data-reason="too_long"[^>]*><code>too_long</code> <span class="count">1</span>', html)
    assert re.search(r'data-tab="keep"[^>]*>Kept <span class="count" data-role="count">4</span>', html)
    assert re.search(r'data-tab="drop" aria-current="page">Dropped <span class="count" data-role="count">3</span>', html)
    assert reverse("image-detail", args=[decision(run, "dog").image_id]) in html
    assert "<kbd>a</kbd> keep" in html and "js/review.js" in html


def test_the_step_page_filters_by_reason(alice_client, run):
    url = reverse("run-step", args=[run.pk, WORDS])
    response = alice_client.get(url, {"tab": "drop", "reason": "too_short"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert "<html" not in html and 'id="decisions"' in html and "HX-Request" in response["Vary"]
    assert sorted(rows_of(html)) == sorted(str(decision(run, t).pk) for t in ("dog", "two cats"))


def test_the_step_page_filters_by_score_range(alice_client, run):
    url = reverse("run-step", args=[run.pk, WORDS])
    html = alice_client.get(url, {"tab": "drop", "min_score": "10"}).content.decode()
    assert rows_of(html) == [str(decision(run, "a very long caption that goes on and on about nothing at all").pk)]
    html = alice_client.get(url, {"tab": "keep", "min_score": "5.5", "max_score": "6"}).content.decode()
    assert len(rows_of(html)) == 3  # the three six-word captions, not the five-word one
    html = alice_client.get(url, {"tab": "drop", "min_score": "nonsense"}).content.decode()
    assert len(rows_of(html)) == 3  # a bad bound is ignored


def test_a_caption_with_a_script_tag_is_shown_as_text(alice_client, run):
    html = alice_client.get(reverse("run-step", args=[run.pk, WORDS]), {"tab": "keep"}).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; a cat on a sofa" in html
    assert "<script>alert(1)" not in html


def test_a_transform_shows_the_raw_text_with_removed_spans_struck_next_to_the_new_text(alice_client, run):
    html = alice_client.get(reverse("run-step", args=[run.pk, 1]), {"tab": "keep"}).content.decode()
    assert '<p class="caption-text raw-text"><del>stock photo </del>a dog on a beach</p>' in html
    assert '<p class="caption-text after-text">a dog on a beach</p>' in html


def test_a_transform_without_spans_shows_a_word_diff(alice_client, run):
    html = alice_client.get(reverse("run-step", args=[run.pk, 2]), {"tab": "keep"}).content.decode()
    assert '<del>Harrison Ford</del>' in html and "<ins>actor</ins>" in html
    assert "at the premiere in Paris" in html


def test_a_later_step_shows_the_raw_text_next_to_the_text_it_saw(alice_client, run):
    html = alice_client.get(reverse("run-step", args=[run.pk, WORDS]), {"tab": "keep"}).content.decode()
    row = html[html.index(f'id="decision-{decision(run, "stock photo a dog on a beach").pk}"'):]
    row = row[:row.index("</article>")]
    assert '<p class="caption-text raw-text">stock photo a dog on a beach</p>' in row
    assert "As this step saw it" in row and '<p class="caption-text after-text">a dog on a beach</p>' in row


def test_an_image_step_shows_its_images(alice_client, run):
    html = alice_client.get(reverse("run-step", args=[run.pk, 0])).content.decode()
    assert len(rows_of(html)) == 1 and "too_narrow" in html and "50×200" in html


def test_an_unknown_step_is_404(alice_client, run):
    assert alice_client.get(reverse("run-step", args=[run.pk, 9])).status_code == 404


# --- Overrides ----------------------------------------------------------------------------------


def test_a_plain_form_override_changes_the_final_outcome_and_the_funnel(alice_client, run):
    d = decision(run, "two cats")
    response = alice_client.post(reverse("decision-override", args=[d.pk]),
                                 {"outcome": "keep", "note": "short but fine", "return_query": "tab=drop&reason=too_short"})
    assert response.status_code == 302
    assert response["Location"] == reverse("run-step", args=[run.pk, WORDS]) + f"?tab=drop&reason=too_short#decision-{d.pk}"
    d.refresh_from_db()
    assert d.final_outcome == "keep" and d.reviews.get().note == "short but fine"
    assert (funnel(run, WORDS)["kept"], funnel(run, WORDS)["dropped"]) == (5, 2)
    html = alice_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'data-step="3" data-entered="7" data-kept="5" data-dropped="2"' in html


def test_an_htmx_override_answers_with_the_row_and_the_new_tab_counts(alice_client, run):
    d = decision(run, "a red bus on a street")
    response = alice_client.post(reverse("decision-override", args=[d.pk]),
                                 {"outcome": "drop", "note": "<b>blurry</b>", "return_query": "tab=keep"},
                                 HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert f'id="decision-{d.pk}"' in html and 'data-final="drop"' in html and "is-overridden" in html
    assert 'data-role="override">override: <span class="badge outcome-drop">Drop</span>' in html
    assert "&lt;b&gt;blurry&lt;/b&gt;" in html  # the note is text
    assert 'id="outcome-tabs" class="tabs" aria-label="Decisions by outcome" hx-swap-oob="true"' in html
    assert re.search(r'data-tab="keep" aria-current="page">Kept <span class="count" data-role="count">3</span>', html)
    assert re.search(r'data-tab="drop">Dropped <span class="count" data-role="count">4</span>', html)
    assert funnel(run, WORDS)["dropped"] == 4
    # Overriding back to the filter's own outcome clears the override.
    alice_client.post(reverse("decision-override", args=[d.pk]), {"outcome": "keep"}, HTTP_HX_REQUEST="true")
    d.refresh_from_db()
    assert d.override == "" and d.reviews.count() == 2


def test_an_override_with_a_bad_outcome_changes_nothing(alice_client, run):
    d = decision(run, "dog")
    response = alice_client.post(reverse("decision-override", args=[d.pk]), {"outcome": "maybe"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "outcome must be one of" in response.content.decode()
    d.refresh_from_db()
    assert d.override == "" and not Review.objects.exists()


def test_bulk_override_of_the_selected_decisions(alice_client, run):
    chosen = [decision(run, "dog"), decision(run, "two cats")]
    response = alice_client.post(reverse("run-step-overrides", args=[run.pk, WORDS]),
                                 {"ids": [d.pk for d in chosen], "outcome": "keep", "note": "short is fine here",
                                  "return_query": "tab=drop"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "2 decisions set to keep." in html
    assert re.search(r'data-tab="drop" aria-current="page">Dropped <span class="count" data-role="count">1</span>', html)
    assert len(rows_of(html)) == 1
    assert all(d.reviews.get().note == "short is fine here" for d in chosen)
    assert (funnel(run, WORDS)["kept"], funnel(run, WORDS)["dropped"]) == (6, 1)


def test_bulk_override_of_all_on_the_page_without_javascript(alice_client, run):
    page_ids = [d.pk for d in FilterDecision.objects.filter(run=run, step=WORDS, outcome="drop")]
    response = alice_client.post(reverse("run-step-overrides", args=[run.pk, WORDS]),
                                 {"page_ids": page_ids, "all_on_page": "1", "outcome": "keep", "return_query": "tab=drop"})
    assert response.status_code == 302 and response["Location"].endswith("?tab=drop")
    assert funnel(run, WORDS)["dropped"] == 0


def test_bulk_override_only_touches_decisions_of_that_step(alice_client, run):
    elsewhere = FilterDecision.objects.get(run=run, step=0, outcome="drop")
    response = alice_client.post(reverse("run-step-overrides", args=[run.pk, WORDS]),
                                 {"ids": [elsewhere.pk], "outcome": "keep"}, HTTP_HX_REQUEST="true")
    assert "Select some decisions first" in response.content.decode()
    elsewhere.refresh_from_db()
    assert elsewhere.override == ""


# --- The score histogram --------------------------------------------------------------------------


def test_the_histogram_draws_the_scores_and_the_thresholds(alice_client, run):
    html = alice_client.get(reverse("run-step", args=[run.pk, WORDS])).content.decode()
    assert '<svg class="chart histogram-chart"' in html
    assert re.search(r'<line class="threshold" data-name="min_words" data-value="3\.0"', html)
    assert re.search(r'<line class="threshold" data-name="max_words" data-value="8\.0"', html)
    assert 'hx-trigger="input changed delay:200ms"' in html and 'name="th_min_words"' in html
    counts = [int(n) for n in re.findall(r"<title>[^<]*: (\d+) (?:kept|dropped|other)</title>", html)]
    assert sum(counts) == 7


def test_the_what_if_counts_come_from_the_moved_thresholds(alice_client, run):
    url = reverse("run-step-histogram", args=[run.pk, WORDS])
    # Scores: kept 5, 6, 6, 6; dropped 1, 2 (too short) and 13 (too long). Bounds now [3, 8].
    html = alice_client.get(url, {"th_min_words": "2", "th_max_words": "5"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in html and 'id="histogram-chart"' in html
    assert '<strong data-role="to-drop">3</strong> kept items would be dropped' in html
    assert '<strong data-role="to-keep">1</strong> dropped item would be kept' in html
    assert re.search(r'<line class="threshold proposed" data-name="max_words" data-value="5\.0"', html)
    html = alice_client.get(url, {"th_min_words": "1", "th_max_words": "20"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-role="to-drop">0<' in html and 'data-role="to-keep">3<' in html
    html = alice_client.get(url, {"th_min_words": "abc"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Enter a number." in html


def test_the_what_if_leaves_overridden_decisions_alone(alice_client, run):
    d = decision(run, "two cats")
    alice_client.post(reverse("decision-override", args=[d.pk]), {"outcome": "keep"})
    html = alice_client.get(reverse("run-step-histogram", args=[run.pk, WORDS]), {"th_min_words": "2"},
                            HTTP_HX_REQUEST="true").content.decode()
    assert 'data-role="to-keep">0<' in html


def test_the_what_if_counts_with_aggregates_not_rows(alice_client, run, django_assert_max_num_queries):
    url = reverse("run-step-histogram", args=[run.pk, WORDS])
    with django_assert_max_num_queries(12):
        response = alice_client.get(url, {"th_min_words": "2"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and 'id="histogram-chart"' in html  # the fragment, with its counts
    assert 'data-role="to-drop">0<' in html and 'data-role="to-keep">1<' in html  # "two cats" would be kept


def test_the_histogram_page_works_without_htmx(alice_client, run):
    html = alice_client.get(reverse("run-step-histogram", args=[run.pk, WORDS]), {"th_max_words": "5"}).content.decode()
    assert "<html" in html and "kept items would be dropped" in html


def test_the_step_page_shows_its_kept_decisions_in_a_fixed_number_of_queries(alice_client, run,
                                                                               django_assert_max_num_queries):
    with django_assert_max_num_queries(20):
        response = alice_client.get(reverse("run-step", args=[run.pk, WORDS]), {"tab": "keep"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and len(rows_of(html)) == 4  # the four kept captions, each a row
    assert "a dog on a beach" in html and "two cats" not in html  # kept shown, dropped not


# --- The charts on their own ------------------------------------------------------------------------


def test_the_funnel_counts_each_unit_from_its_own_start_and_escapes_labels():
    from curation import charts

    rows = charts.funnel_rows([
        {"step": 0, "filter": "a", "label": "Size <b>", "target": "image", "entered": 200, "kept": 150, "dropped": 50,
         "not_applicable": 0},
        {"step": 1, "filter": "b", "label": "Words", "target": "caption", "entered": 1000, "kept": 700, "dropped": 299,
         "not_applicable": 1},
        {"step": 2, "filter": "c", "label": "Nouns", "target": "caption", "entered": 701, "kept": 600, "dropped": 101,
         "not_applicable": 0},
    ])
    assert [round(r["pct_dropped"], 1) for r in rows] == [25.0, 29.9, 10.1]
    assert (round(rows[2]["pct_entered"], 1), round(rows[2]["pct_left"], 1)) == (70.1, 60.0)
    assert charts.fmt_pct(rows[1]["pct_na"]) == "0.1" and charts.fmt_pct(0.01) == "<0.1" and charts.fmt_pct(0) == "0.0"
    svg = charts.funnel_svg(rows, links=["/x?a=1&b=2", "", ""])
    assert "Size &lt;b&gt;" in svg and "<b>" not in svg
    assert 'href="/x?a=1&amp;b=2"' in svg
    assert "−299" in svg and "(29.9% of entered)" in svg and "none dropped" not in svg
    kept_all = charts.funnel_rows([{"step": 0, "filter": "a", "label": "Size", "target": "image", "entered": 5,
                                    "kept": 5, "dropped": 0, "not_applicable": 0}])
    svg = charts.funnel_svg(kept_all)
    assert "none dropped" in svg and "−0" not in svg and "of entered" not in svg


def test_thresholds_are_the_numeric_min_and_max_parameters():
    from curation import charts

    params = {"min_rho": 0.2, "max_rho": 5, "max_ratio": True, "min_label_score": None, "window": 3,
              "max_compound": float("nan"), "max_details": 40, "max_chars": 2000}
    names = ("min_rho", "max_rho", "max_ratio", "min_label_score", "max_compound")
    assert charts.thresholds_of(params, names) == {"min_rho": 0.2, "max_rho": 5.0}
    # Numeric parameters that are not bounds on the score (how many n-grams a decision lists, a
    # character limit) are never drawn as thresholds nor counted in the what-if.
    assert charts.thresholds_of(params) == {}
    from curation.pipeline import registry

    informativeness = registry.get("informativeness")
    # Its lower bound is relative by default (min_rho_percentile, issue 24): min_rho is drawn once a curator sets it.
    assert set(charts.thresholds_of(informativeness.defaults, informativeness.score_thresholds)) == {"max_rho"}
    assert set(charts.thresholds_of({**informativeness.defaults, "min_rho": 20}, informativeness.score_thresholds)) \
        == {"min_rho", "max_rho"}
    length = registry.get("caption_length")
    assert set(charts.thresholds_of(length.defaults, length.score_thresholds)) == {"min_tokens", "max_tokens"}
