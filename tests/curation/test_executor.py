"""The executor: chunks, step order, transforms as child captions, idempotent reruns, failed chunks,
run-level steps, the funnel and overrides. Uses small test filters so it does not depend on spaCy."""
import pytest

from curation.models import Caption, FilterDecision, FilterRun, Image, Pipeline, RunChunk
from curation.pipeline import executor, registry
from curation.pipeline.base import Decision, Filter, drop, keep
from curation.pipeline.executor import chunks
from curation.services import decision_override, run_create

pytestmark = pytest.mark.django_db


class WideEnough(Filter):
    name, target, defaults = "test_wide_enough", "image", {"min_width": 100}

    def apply(self, items):
        return [keep(score=it.width) if (it.width or 0) >= self.params["min_width"] else drop("too_narrow", it.width)
                for it in items]


class StripStock(Filter):
    name, is_transform, defaults = "test_strip_stock", True, {}

    def apply(self, items):
        return [Decision("keep", "cropped", text=it.text.replace("stock photo ", "")) if "stock photo " in it.text
                else keep("unchanged") for it in items]


class NoBadWords(Filter):
    name, defaults = "test_no_bad_words", {"word": "bad"}

    def apply(self, items):
        if any("explode" in it.text for it in items):
            raise RuntimeError("boom")
        return [drop("bad_word") if self.params["word"] in it.text.split() else keep() for it in items]


class OnePerImage(Filter):
    name, run_level, defaults = "test_one_per_image", True, {}

    def decide_run(self, rows):
        seen, out = set(), {}
        for row in rows:
            if row["image_id"] in seen:
                out[row["caption_id"]] = drop("second_caption")
            seen.add(row["image_id"])
        return out


class Shorten(Filter):
    """A transform that drops what it leaves too short (as hypernymization does), with the new text."""
    name, is_transform, defaults = "test_shorten", True, {}

    def apply(self, items):
        out = []
        for it in items:
            text = it.text.replace("a narrow ", "")
            out.append(Decision("drop" if len(text.split()) < 2 else "keep", "too_short", text=text)
                       if text != it.text else keep("unchanged"))
        return out


for cls in (WideEnough, StripStock, NoBadWords, OnePerImage, Shorten):
    registry.FILTERS.setdefault(cls.name, cls)

STEPS = [{"filter": "test_wide_enough"}, {"filter": "test_strip_stock"}, {"filter": "test_no_bad_words"},
         {"filter": "test_one_per_image"}]


def run_it(collection, steps=STEPS, chunk=2, monkeypatch=None):
    pipeline = Pipeline.objects.create(name=f"p{Pipeline.objects.count()}", steps=steps)
    if monkeypatch:
        monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", chunk)
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    for chunk_row in RunChunk.objects.filter(run=run):
        try:
            executor.run_chunk(run.pk, chunk_row.index)
        except Exception as exc:  # what the task does after its retries  # noqa: BLE001
            executor.chunk_failed(run.pk, chunk_row.index, str(exc))
    run.refresh_from_db()
    return run


def test_steps_run_in_order_on_what_is_still_alive_and_the_funnel_counts_them(collection, monkeypatch):
    run = run_it(collection, monkeypatch=monkeypatch)
    assert run.status == FilterRun.Status.DONE and run.chunks_total == 2
    funnel = {row["filter"]: row for row in run.funnel}
    assert (funnel["test_wide_enough"]["entered"], funnel["test_wide_enough"]["dropped"]) == (3, 1)
    # The narrow image's caption never reaches the caption steps.
    assert funnel["test_strip_stock"]["entered"] == 4
    assert (funnel["test_no_bad_words"]["kept"], funnel["test_no_bad_words"]["dropped"]) == (3, 1)
    assert (funnel["test_one_per_image"]["entered"], funnel["test_one_per_image"]["dropped"]) == (3, 1)
    assert FilterDecision.objects.filter(run=run).count() == 3 + 4 + 4 + 3


def test_a_transform_saves_its_text_as_a_child_caption_with_lineage(collection, monkeypatch):
    run = run_it(collection, monkeypatch=monkeypatch)
    child = Caption.objects.get(origin="transformed")
    assert child.text == "a dog on a beach"
    assert child.parent.text == "stock photo a dog on a beach"
    assert [c.text for c in child.lineage()] == ["a dog on a beach", "stock photo a dog on a beach"]
    decision = FilterDecision.objects.get(run=run, filter_name="test_strip_stock", caption=child.parent)
    assert (decision.text_before, decision.text_after) == ("stock photo a dog on a beach", "a dog on a beach")


def test_a_chunk_processed_twice_writes_each_decision_once(collection, monkeypatch):
    run = run_it(collection, monkeypatch=monkeypatch)
    before = FilterDecision.objects.filter(run=run).count()
    chunk = run.chunks.first()
    executor.process_chunk(run, chunk.item_ids)  # a re-delivered task
    assert FilterDecision.objects.filter(run=run).count() == before
    assert Caption.objects.filter(origin="transformed").count() == 1


def test_a_chunk_that_keeps_failing_is_marked_failed_and_the_rest_completes(collection, monkeypatch):
    Caption.objects.create(image=Image.objects.get(external_id="i0"), text="this will explode", origin="alt_text")
    run = run_it(collection, monkeypatch=monkeypatch)
    assert run.status == FilterRun.Status.DONE and run.chunks_failed == 1 and run.chunks_done == 1
    failed = run.chunks.get(status=RunChunk.Status.FAILED)
    assert "boom" in failed.error and "test_no_bad_words" in failed.error
    assert "1 chunk(s) failed" in run.error
    assert FilterDecision.objects.filter(run=run, image__external_id="i2").exists()


def test_an_override_changes_the_funnel_and_keeps_its_history(collection, monkeypatch, alice):
    run = run_it(collection, monkeypatch=monkeypatch)
    decision = FilterDecision.objects.get(run=run, reason="bad_word")
    decision_override(decision=decision, outcome="keep", note="sarcasm, fine", user=alice)
    run.refresh_from_db()
    assert {row["filter"]: row["dropped"] for row in run.funnel}["test_no_bad_words"] == 0
    assert decision.final_outcome == "keep" and decision.reviews.get().note == "sarcasm, fine"


def test_the_funnel_is_a_count_of_the_decisions(collection, monkeypatch):
    # Image drops, a transform, a failing chunk (its decisions roll back) and a run-level step.
    Caption.objects.create(image=Image.objects.get(external_id="i0"), text="this will explode", origin="alt_text")
    Image.objects.create(collection=collection, external_id="i3", width=300, height=200, format="JPEG",
                         sha256="3" * 64, status="ready")
    for text in ("a bad dog", "a good dog", "stock photo a cat"):
        Caption.objects.create(image=Image.objects.get(external_id="i3"), text=text, origin="alt_text")
    run = run_it(collection, monkeypatch=monkeypatch)
    assert run.chunks_failed == 1 and run.chunks_done == 1
    assert run.funnel == executor.compute_funnel(run)
    assert {row["filter"]: row["dropped"] for row in run.funnel} == {
        "test_wide_enough": 0, "test_strip_stock": 0, "test_no_bad_words": 2, "test_one_per_image": 1}


def test_an_override_made_while_the_run_goes_is_counted_in_the_funnel_it_ends_with(collection, monkeypatch, alice):
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 2)
    run = run_create(collection=collection, pipeline=Pipeline.objects.create(name="mid", steps=STEPS), enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    first, second = RunChunk.objects.filter(run=run).order_by("index")
    executor.run_chunk(run.pk, first.index)
    narrow = FilterDecision.objects.get(run=run, reason="too_narrow")
    decision_override(decision=narrow, outcome="keep", note="wide enough for us", user=alice)
    executor.run_chunk(run.pk, second.index)
    run.refresh_from_db()
    assert run.status == FilterRun.Status.DONE
    assert run.funnel == executor.compute_funnel(run)
    assert {row["filter"]: (row["kept"], row["dropped"]) for row in run.funnel}["test_wide_enough"] == (3, 0)


def test_finalising_again_counts_the_same_funnel_from_the_decisions(collection, monkeypatch):
    run = run_it(collection, monkeypatch=monkeypatch)
    expected = run.funnel
    run.funnel = []
    executor.finalise(run)
    assert run.funnel == expected == executor.compute_funnel(run)


def test_unknown_filters_and_parameters_are_refused_before_a_run_starts(collection):
    from curation.errors import IngestError

    for steps in ([{"filter": "no_such_filter"}], [{"filter": "test_wide_enough", "params": {"nope": 1}}], []):
        with pytest.raises(IngestError):
            run_create(collection=collection, pipeline=Pipeline(name="x", steps=steps), enqueue=False)


def test_the_api_lists_decisions_by_reason_and_score_and_takes_overrides(collection, monkeypatch, alice, bob):
    from rest_framework.test import APIClient

    run = run_it(collection, monkeypatch=monkeypatch)
    api = APIClient()
    api.force_authenticate(bob)
    assert api.get(f"/api/runs/{run.pk}/decisions/").status_code == 403
    api.force_authenticate(alice)
    body = api.get(f"/api/runs/{run.pk}/decisions/", {"reason": "too_narrow", "max_score": 60}).json()
    assert body["count"] == 1 and body["results"][0]["score"] == 50
    assert api.get(f"/api/runs/{run.pk}/decisions/", {"details__secret": 1}).status_code == 400
    # By image: the image's own decision and its captions' (found through the captions: no index on image_id
    # over the caption rows), and no other image's.
    wide = Image.objects.get(collection=collection, external_id="i0")
    rows = api.get(f"/api/runs/{run.pk}/decisions/", {"image": wide.pk, "page_size": 100}).json()["results"]
    assert {(r["image"], r["caption"] is None) for r in rows} == {(wide.pk, True), (wide.pk, False)}
    assert len(rows) == FilterDecision.objects.filter(run=run, image=wide).count() == 1 + 2 * 3
    decision_id = body["results"][0]["id"]
    response = api.post(f"/api/decisions/{decision_id}/override/", {"outcome": "keep", "note": "fine"}, format="json")
    assert response.status_code == 200 and response.json()["final_outcome"] == "keep"
    ids = list(FilterDecision.objects.filter(run=run, filter_name="test_no_bad_words").values_list("pk", flat=True))
    response = api.post(f"/api/runs/{run.pk}/overrides/", {"ids": ids, "outcome": "drop", "note": "bulk"}, format="json")
    assert response.json() == {"overridden": len(ids)}
    assert api.get(f"/api/runs/{run.pk}/").json()["funnel"][2]["dropped"] == len(ids)
    assert api.get("/api/pipelines/filters/").status_code == 200


def test_deleting_an_image_deletes_its_own_decisions_and_its_captions_decisions_only(collection, monkeypatch):
    """The image's own rows are found by the partial index on image-level rows, its captions' rows through
    its captions (FilterDecision.image cascades to image-level rows only)."""
    run = run_it(collection, monkeypatch=monkeypatch)
    wide = Image.objects.get(collection=collection, external_id="i0")
    assert FilterDecision.objects.filter(run=run, image=wide, caption__isnull=True).count() == 1
    assert FilterDecision.objects.filter(run=run, image=wide, caption__isnull=False).count() == 2 * 3
    others = FilterDecision.objects.filter(run=run).exclude(image=wide).count()
    wide.delete()
    assert not FilterDecision.objects.filter(image_id=wide.pk).exists()
    assert FilterDecision.objects.filter(run=run).count() == others > 0


def test_a_run_has_decisions_about_images_through_their_own_rows_or_their_captions_rows(collection, monkeypatch):
    """What decides between a re-delivered chunk's plain COPY and its ON CONFLICT path."""
    run = run_it(collection, monkeypatch=monkeypatch)
    wide, narrow, third = (Image.objects.get(collection=collection, external_id=f"i{i}") for i in range(3))
    assert chunks.has_decisions(run, [wide.pk, narrow.pk])
    FilterDecision.objects.filter(run=run, image=wide, caption__isnull=False).delete()
    assert chunks.has_decisions(run, [wide.pk])  # its own row is left
    FilterDecision.objects.filter(run=run, image=third, caption__isnull=True).delete()
    assert chunks.has_decisions(run, [third.pk])  # its captions' rows are left
    FilterDecision.objects.filter(run=run, image__in=[wide, third]).delete()
    assert not chunks.has_decisions(run, [wide.pk, third.pk])
    other = run_create(collection=collection, pipeline=Pipeline.objects.create(name="other", steps=STEPS), enqueue=False)
    assert not chunks.has_decisions(other, [narrow.pk])
    assert not chunks.has_decisions(run, [])


def test_captions_of_images_a_run_level_step_drops_leave_the_later_steps_and_the_funnel_chains(
        collection, monkeypatch, alice, client):
    """The chunks decide the caption steps before the run's duplicate-image step runs over the whole
    run; the captions of the duplicate it drops never reached those steps in the pipeline's order, so
    their decisions there are taken back and each step counts what the one before it let through."""
    for i, phash in enumerate(["ffd8a0c0e0f01234", "0f0f0f0f0f0f0f0f", "a5a5a5a5a5a5a5a5"]):
        collection.images.filter(external_id=f"i{i}").update(phash=phash)
    copy = Image.objects.create(collection=collection, external_id="i0-copy", width=300, height=200, format="JPEG",
                                sha256="9" * 64, phash="ffd8a0c0e0f01235", status="ready")  # one bit off i0's
    Caption.objects.create(image=copy, text="stock photo a dog on a beach, again", origin="alt_text")
    Caption.objects.create(image=copy, text="a bad copy", origin="alt_text")
    steps = [{"filter": "test_wide_enough"}, {"filter": "near_duplicate"},
             {"filter": "test_strip_stock"}, {"filter": "test_no_bad_words"}, {"filter": "test_one_per_image"}]
    # A curator reviews one of the copy's caption decisions while the run is going: it stays.
    real_finalise = executor.finalise

    def finalise_after_a_review(run):
        reviewed = FilterDecision.objects.get(run=run, step=3, caption__text="a bad copy")
        decision_override(decision=reviewed, outcome="keep", note="looked at it", user=alice)
        real_finalise(run)

    monkeypatch.setattr("curation.pipeline.executor.runlevel.finalise", finalise_after_a_review)
    run = run_it(collection, steps=steps, monkeypatch=monkeypatch)
    assert run.status == FilterRun.Status.DONE
    dup = FilterDecision.objects.get(run=run, step=1, image=copy)
    assert (dup.outcome, dup.reason, dup.details["of"]) == ("drop", "near_duplicate_of", collection.images.get(
        external_id="i0").pk)
    copy_captions = Caption.objects.filter(image=copy, origin="alt_text")
    later = FilterDecision.objects.filter(run=run, step__in=[2, 3], caption__in=copy_captions)
    assert list(later.values_list("caption__text", "step", "override")) == [("a bad copy", 3, "keep")]
    funnel = run.funnel
    # Step 3 counts the reviewed decision besides the four captions that step 2 let through.
    assert [row["entered"] for row in funnel] == [4, 3, 4, 4 + 1, 3]
    assert funnel == executor.compute_funnel(run)
    # The transformed caption made from the copy's raw text before the duplicate step ran stays as a
    # record; the image's page says the run dropped the image, so that text is not released.
    child = Caption.objects.get(image=copy, origin="transformed")
    client.force_login(alice)
    page = client.get(f"/images/{copy.pk}/").content.decode()
    card = page[page.index(f'id="caption-{child.pk}"'):]
    card = card[:card.index("</article>")]
    assert f'data-run="{run.pk}" data-outcome="drop"' in card and "the image" in card
    assert "step 2 · near_duplicate" in card and "does not release this transformed text" in card
    original = collection.images.get(external_id="i0").pk
    assert f'<a href="/images/{original}/" data-role="duplicate-of">image {original}</a>' in card


def test_an_override_at_a_run_level_step_brings_the_later_steps_in_line(
        collection, monkeypatch, alice, eager_celery, django_capture_on_commit_callbacks):
    """Keeping the near duplicate puts its captions back through the steps after that one (the chunk
    steps run again over the image); dropping it again takes their decisions back. The funnel follows."""
    for i, phash in enumerate(["ffd8a0c0e0f01234", "0f0f0f0f0f0f0f0f", "a5a5a5a5a5a5a5a5"]):
        collection.images.filter(external_id=f"i{i}").update(phash=phash)
    copy = Image.objects.create(collection=collection, external_id="i0-copy", width=300, height=200, format="JPEG",
                                sha256="9" * 64, phash="ffd8a0c0e0f01235", status="ready")
    Caption.objects.create(image=copy, text="stock photo a dog on a beach, again", origin="alt_text")
    Caption.objects.create(image=copy, text="a bad copy", origin="alt_text")
    steps = [{"filter": "test_wide_enough"}, {"filter": "near_duplicate"}, {"filter": "test_strip_stock"},
             {"filter": "test_no_bad_words"}, {"filter": "test_one_per_image"}]
    run = run_it(collection, steps=steps, monkeypatch=monkeypatch)
    later = FilterDecision.objects.filter(run=run, step__in=[2, 3], image=copy)
    assert not later.exists()
    dup = FilterDecision.objects.get(run=run, step=1, image=copy)

    with django_capture_on_commit_callbacks(execute=True):
        decision_override(decision=dup, outcome="keep", note="a stereo pair, not a copy", user=alice)
    assert sorted(later.values_list("step", "caption__text", "outcome")) == [
        (2, "a bad copy", "keep"), (2, "stock photo a dog on a beach, again", "keep"),
        (3, "a bad copy", "drop"), (3, "stock photo a dog on a beach, again", "keep")]
    run.refresh_from_db()
    assert run.funnel == executor.compute_funnel(run)
    assert [row["entered"] for row in run.funnel][:4] == [4, 3, 6, 6]

    with django_capture_on_commit_callbacks(execute=True):
        decision_override(decision=dup, outcome="drop", note="on second thoughts, a copy", user=alice)
    assert not later.exists()
    run.refresh_from_db()
    assert [row["entered"] for row in run.funnel][:4] == [4, 3, 4, 4]


def test_an_override_at_a_chunk_step_of_a_finished_run_lets_the_item_go_on_or_takes_back_what_followed(
        collection, monkeypatch, alice, eager_celery, django_capture_on_commit_callbacks):
    run = run_it(collection, monkeypatch=monkeypatch)
    narrow = collection.images.get(external_id="i1")
    narrow_decision = FilterDecision.objects.get(run=run, step=0, image=narrow)
    after_narrow = FilterDecision.objects.filter(run=run, step__gt=0, caption__image=narrow)
    assert narrow_decision.outcome == "drop" and not after_narrow.exists()

    # The curator keeps the narrow image: its caption goes through the chunk steps after that one.
    with django_capture_on_commit_callbacks(execute=True):
        decision_override(decision=narrow_decision, outcome="keep", user=alice)
    # Run-level steps do not run again: the caption is kept there unjudged, as a release of the run keeps it,
    # so that the funnel's last row counts it too.
    assert sorted(after_narrow.values_list("step", "filter_name", "outcome", "reason")) == [
        (1, "test_strip_stock", "keep", "unchanged"), (2, "test_no_bad_words", "keep", ""),
        (3, "test_one_per_image", "keep", "not_judged")]
    run.refresh_from_db()
    assert run.funnel == executor.compute_funnel(run)
    assert [row["entered"] for row in run.funnel] == [3, 5, 5, 4]

    # The curator drops a caption a later step had kept: what followed it goes, and the funnel follows.
    dog = FilterDecision.objects.get(run=run, step=1, caption__text="a dog")
    assert FilterDecision.objects.filter(run=run, step__gt=1, caption=dog.caption).count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        decision_override(decision=dog, outcome="drop", note="not the dog in the photo", user=alice)
    assert not FilterDecision.objects.filter(run=run, step__gt=1, caption=dog.caption).exists()
    run.refresh_from_db()
    assert [row["entered"] for row in run.funnel] == [3, 5, 4, 3]

    # And the narrow image dropped again: its caption's decisions go too.
    with django_capture_on_commit_callbacks(execute=True):
        decision_override(decision=narrow_decision, outcome="drop", user=alice)
    assert not after_narrow.exists()
    run.refresh_from_db()
    assert run.funnel == executor.compute_funnel(run)


def test_a_bulk_override_reconciles_in_tasks_of_bounded_size_and_only_for_finished_runs(
        collection, monkeypatch, alice, django_capture_on_commit_callbacks):
    from curation import services, tasks
    from curation.services import decisions_override

    sent = []
    monkeypatch.setattr(tasks.filter_reconcile, "delay", lambda run_id, image_ids: sent.append((run_id, image_ids)))
    monkeypatch.setattr(services, "RECONCILE_IMAGES", 2)
    run = run_it(collection, monkeypatch=monkeypatch)
    decisions = list(FilterDecision.objects.filter(run=run, step=1))  # four captions of two images
    with django_capture_on_commit_callbacks(execute=True):
        decisions_override(decisions=decisions, outcome="drop", user=alice)
    images = sorted({d.image_id for d in decisions})
    assert sent == [(run.pk, images)]
    sent.clear()
    everything = list(FilterDecision.objects.filter(run=run, step=0))  # three images
    with django_capture_on_commit_callbacks(execute=True):
        decisions_override(decisions=everything, outcome="keep", user=alice)
    assert [len(ids) for _, ids in sent] == [2, 1]
    sent.clear()
    FilterRun.objects.filter(pk=run.pk).update(status=FilterRun.Status.RUNNING)  # still going: finalise decides
    with django_capture_on_commit_callbacks(execute=True):
        decisions_override(decisions=everything, outcome="drop", user=alice)
    assert sent == []


def test_keeping_a_transforms_drop_saves_the_transformed_text_as_a_child(
        collection, monkeypatch, alice, eager_celery, django_capture_on_commit_callbacks):
    steps = [{"filter": "test_shorten"}, {"filter": "test_no_bad_words"}]
    run = run_it(collection, steps=steps, monkeypatch=monkeypatch)
    short = FilterDecision.objects.get(run=run, step=0, caption__text="a narrow picture")
    assert (short.outcome, short.text_after) == ("drop", "picture")
    assert not Caption.objects.filter(parent=short.caption).exists()
    with django_capture_on_commit_callbacks(execute=True):
        decision_override(decision=short, outcome="keep", note="one word is enough here", user=alice)
    child = Caption.objects.get(parent=short.caption)
    assert (child.text, child.origin, child.metadata["step"]) == ("picture", "transformed", 0)
    after = FilterDecision.objects.get(run=run, step=1, caption=short.caption)
    assert after.outcome == "keep"  # it went on to the next step
