"""What a run tells a curator is true: a step that removes (almost) everything is flagged on the run's page and
in ``run_pipeline``; a finished run's items/s stays what it was at the end; the run-level steps show as a phase of
their own, not as 99%; and after a curator's overrides at a middle step the funnel's last row is what a release
built from the run selects."""
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from curation.models import Collection, FilterDecision, FilterRun, Pipeline, RunChunk
from curation.pipeline import executor, registry
from curation.pipeline.base import Filter, drop, keep
from curation.services import decision_override, run_create
from releases.freeze import freeze
from releases.models import ReleaseItem

from .release_helpers import add_caption, add_image, make_release


class StartsCapitalised(Filter):
    """The capitalisation rule as a strict preset applies it: lower-case alt-text fails it."""
    name, defaults = "test_starts_capitalised", {}

    def apply(self, items):
        return [keep() if it.text[:1].isupper() else drop("lower_case_start") for it in items]


class MentionsBeach(Filter):
    name, defaults = "test_mentions_beach", {}

    def apply(self, items):
        return [keep() if "beach" in it.text else drop("off_topic") for it in items]


class LongEnough(Filter):
    name, defaults = "test_long_enough", {"min_words": 5}

    def apply(self, items):
        return [keep() if len(it.text.split()) >= self.params["min_words"] else drop("too_short") for it in items]


class NotAllCaps(Filter):
    """A run-level step (as rare entity types is): drops captions shouted in capitals, across the run."""
    name, run_level, defaults = "test_not_all_caps", True, {}

    def decide_run(self, rows):
        return {row["caption_id"]: drop("all_caps") if row["text"].isupper() else keep("calm") for row in rows}


for cls in (StartsCapitalised, MentionsBeach, LongEnough, NotAllCaps):
    registry.FILTERS.setdefault(cls.name, cls)

LOWER_CASE_ALT_TEXT = [
    "kids building a sandcastle at low tide", "two surfers waiting for a wave", "a lighthouse on a rocky point",
    "fishing boats moored in the harbour", "a dog chasing a frisbee on the sand", "seagulls over a pier at dusk",
    "an old couple walking along the promenade", "beach huts painted in bright colours",
    "a kite surfer jumping over the waves", "Tourists eating ice cream by the sea wall",
]


def make_collection(name="seaside alt-text") -> Collection:
    collection = Collection.objects.create(name=name)
    for i, text in enumerate(LOWER_CASE_ALT_TEXT):
        image = add_image(collection, seed=100 + i, external_id=f"sea-{i}")
        add_caption(image, text)
    return collection


def make_run(collection, steps) -> FilterRun:
    pipeline = Pipeline.objects.create(name=f"p{Pipeline.objects.count()}", steps=steps)
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda *a: None)
    for index in RunChunk.objects.filter(run=run).values_list("index", flat=True):
        executor.run_chunk(run.pk, index)
    run.refresh_from_db()
    return run


@pytest.mark.django_db(transaction=True)
def test_run_pipeline_warns_when_a_step_drops_nine_in_ten_or_leaves_nothing(eager_celery, capsys):
    """Priya runs a strict capitalisation step on lower-case alt-text from the command line: 9 of 10 are dropped,
    and the next step drops the last one; both lines are flagged, with a warning under the funnel."""
    collection = make_collection()
    Pipeline.objects.create(name="strict capitals", steps=[{"filter": "test_starts_capitalised"},
                                                           {"filter": "test_mentions_beach"}])
    call_command("run_pipeline", "--collection", collection.name, "--pipeline", "strict capitals")
    out = capsys.readouterr().out
    run = FilterRun.objects.get(collection=collection)
    assert run.status == FilterRun.Status.DONE
    assert [(row["entered"], row["dropped"]) for row in run.funnel] == [(10, 9), (1, 1)]
    assert "dropped 9 of 10 items that entered (90.0%)" in run.funnel[0]["warning"]
    assert "dropped all 1 items" in run.funnel[1]["warning"]
    assert "Warning: step 1 (test_starts_capitalised) dropped 9 of 10 items that entered (90.0%)" in out
    assert "Warning: step 2 (test_mentions_beach) dropped all 1 items that entered" in out
    funnel_lines = [line for line in out.splitlines() if line.startswith(("1 ", "2 "))]
    assert len(funnel_lines) == 2 and all(line.endswith("!") for line in funnel_lines)


@pytest.mark.django_db
def test_the_run_page_flags_the_step_that_drops_nearly_everything_and_not_the_others(alice_client):
    collection = make_collection()
    run = make_run(collection, [{"filter": "test_long_enough", "params": {"min_words": 7}},
                            {"filter": "test_starts_capitalised"}])
    # Step 1 drops the five captions under seven words (50%): no warning. Step 2 drops 4 of 5 (80%): none either.
    assert [(row["entered"], row["dropped"], row["warning"]) for row in run.funnel] == [(10, 5, ""), (5, 4, "")]
    html = alice_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'data-role="funnel-warnings"' not in html and 'data-role="step-warning"' not in html

    strict = make_run(collection, [{"filter": "test_starts_capitalised"}, {"filter": "test_long_enough"}])
    html = alice_client.get(reverse("run-detail", args=[strict.pk])).content.decode()
    assert 'data-role="funnel-warnings"' in html
    box = html[html.index('data-role="funnel-warnings"'):]
    box = box[:box.index("</div>")]
    assert "Step 1 · test_starts_capitalised</a>: dropped 9 of 10" in box and "Step 2" not in box
    assert html.count('data-role="step-warning"') == 1 and "⚠ 90% dropped" in html
    step_page = alice_client.get(reverse("run-step", args=[strict.pk, 0])).content.decode()
    assert 'data-role="step-warning"' in step_page and "This step dropped 9 of 10 items" in step_page
    calm = alice_client.get(reverse("run-step", args=[strict.pk, 1])).content.decode()
    assert 'data-role="step-warning"' not in calm


@pytest.mark.django_db
def test_a_finished_runs_rate_is_frozen_at_its_end_and_the_run_level_phase_is_not_99_percent(alice_client):
    collection = Collection.objects.create(name="frozen")
    now = timezone.now()
    run = FilterRun.objects.create(collection=collection, snapshot=[], status=FilterRun.Status.DONE,
                                   items_total=2000, items_done=2000, chunks_total=4, chunks_done=4,
                                   started_at=now - timedelta(minutes=10), finished_at=now - timedelta(minutes=9))
    # 2,000 items in the run's 60 seconds, however long ago it finished (not 2,000 over 10 minutes).
    assert executor.progress(run)["items_per_second"] == pytest.approx(33.3, abs=0.1)
    assert executor.progress(run)["eta_seconds"] is None
    page = alice_client.get(reverse("run-progress", args=[run.pk])).content.decode()
    assert '<dd data-role="rate">33.3</dd>' in page

    going = FilterRun.objects.create(collection=collection, snapshot=[], status=FilterRun.Status.FINALISING,
                                     items_total=2000, items_done=2000, chunks_total=4, chunks_done=4,
                                     started_at=now - timedelta(seconds=20))
    progress = executor.progress(going)
    assert progress["phase"] == "run_level" and progress["eta_seconds"] is None
    page = alice_client.get(reverse("run-progress", args=[going.pk])).content.decode()
    assert 'data-role="run-level-bar"' in page and "Run-level steps" in page
    assert "99%" not in page and 'data-role="eta"' not in page


@pytest.mark.django_db
def test_after_overrides_at_a_middle_step_the_funnels_last_row_is_what_the_release_selects(alice):
    """Sam's strict middle step drops six short captions; a curator keeps three of them back. The chunk steps run
    again over their images (``reconcile``, as the task does after the override commits), and the run-level step
    at the end, which ran before the override, keeps them unjudged: the funnel's last row and the release agree."""
    collection = make_collection("middle overrides")
    shout = collection.images.get(external_id="sea-0")
    add_caption(shout, "HUGE WAVES HIT THE SEA WALL")
    steps = [{"filter": "test_long_enough", "params": {"min_words": 2}},
             {"filter": "test_long_enough", "params": {"min_words": 7}},
             {"filter": "test_not_all_caps"}]
    run = make_run(collection, steps)
    assert run.status == FilterRun.Status.DONE
    # Six captions under seven words are dropped at the middle step, the shouted one among them.
    assert [(row["entered"], row["dropped"]) for row in run.funnel] == [(11, 0), (11, 6), (5, 0)]

    short = list(FilterDecision.objects.filter(run=run, step=1, outcome="drop").order_by("caption_id"))
    brought_back = short[:3]
    for decision in brought_back:
        decision_override(decision=decision, outcome="keep", note="short but accurate", user=alice)
    executor.reconcile(run.pk, [d.image_id for d in brought_back])
    run.refresh_from_db()

    last = run.funnel[-1]
    release = make_release("seaside r1", collections=[collection.pk], run=run.pk)
    freeze(release)
    released = ReleaseItem.objects.filter(release=release).count()
    assert last["entered"] == 8 and last["kept"] + last["not_applicable"] == released == 8
    unjudged = FilterDecision.objects.filter(run=run, step=2, reason="not_judged")
    assert sorted(unjudged.values_list("caption_id", flat=True)) == sorted(d.caption_id for d in brought_back)
    assert run.funnel == executor.compute_funnel(run)

    # The curator then drops one of them at the same middle step: it leaves the last row and the release.
    decision_override(decision=brought_back[0], outcome="drop", note="on second look, too vague", user=alice)
    executor.reconcile(run.pk, [brought_back[0].image_id])
    run.refresh_from_db()
    again = make_release("seaside r2", collections=[collection.pk], run=run.pk)
    freeze(again)
    last = run.funnel[-1]
    assert last["kept"] + last["not_applicable"] == ReleaseItem.objects.filter(release=again).count() == 7
    assert not FilterDecision.objects.filter(run=run, step=2, caption_id=brought_back[0].caption_id).exists()
