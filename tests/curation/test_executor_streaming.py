"""The executor's fast path for per-item steps: sub-batches whose decisions are COPYed while the next is
computed, decisions of text-only steps kept per distinct text across chunks. It must write exactly the
decisions (and child captions) of the plain path."""
import pytest
from django.db.models import RestrictedError

from curation.models import Caption, Collection, FilterDecision, Image, Pipeline, RunChunk
from curation.pipeline import executor, nlp
from curation.pipeline.executor import chunks, decisions, funnel, items
from curation.pipeline.executor import steps as executor_steps
from curation.pipeline.hypernym import Hypernymize
from curation.services import run_create

pytestmark = pytest.mark.django_db
MEMOISABLE = executor_steps.memoisable

STEPS = ["boilerplate_drop", "boilerplate_crop", "caption_length", "language", "pos_presence", "noun_ratio",
         "unique_word_ratio", "token_repetition", "capitalisation", "unknown_tokens", "polarity", "profanity"]
TEXTS = [
    "Actor Tom Hanks arrives at the Academy Awards in Los Angeles.",
    "Stock photo a dog runs along the beach near the old harbour",
    "a dog runs along the beach",
    "Sale sale cheap sale",
    "Embedded image permalink",
    "Une maison près du vieux pont sur la rivière, au coucher du soleil.",
    "A beautiful smiling happy bride with lovely flowers in the garden",
    "The view of the city from the top of the tower at night.",
    "A tab\there and a back\\slash in the text of a caption",
    "",
    "Stock photo: The mayor of Boston opens the new bridge over the river in July 2007",
]


def _run(collection, sub_batch, chunk_images, monkeypatch, steps=STEPS, step_by_step=False):
    monkeypatch.setattr("curation.pipeline.executor.chunks.SUB_BATCH_CAPTIONS", sub_batch)
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", chunk_images)
    monkeypatch.setattr(executor_steps, "memoisable", (lambda step, flt: False) if step_by_step else MEMOISABLE)
    monkeypatch.setattr(Hypernymize, "text_keyed", not step_by_step)
    pipeline = Pipeline.objects.create(name=f"p{Pipeline.objects.count()}", steps=[{"filter": s} for s in steps])
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda *a: None)
    for chunk in RunChunk.objects.filter(run=run).order_by("index"):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    # The funnel is the sum of what the chunks counted as they wrote (group entries, step by step, text-keyed,
    # run-level): it must be a count of the decisions written.
    assert run.funnel == executor.compute_funnel(run)
    return run


def _decisions(run):
    return sorted(FilterDecision.objects.filter(run=run).values_list(
        "step", "filter_name", "image_id", "caption_id", "outcome", "score", "reason", "details", "text_before",
        "text_after"), key=lambda row: (row[0], row[2], row[3] or 0))


def _children(run):
    return sorted(Caption.objects.filter(origin="transformed", source__startswith=f"run {run.pk}:")
                  .values_list("parent_id", "text"))


@pytest.fixture
def collection():
    collection = Collection.objects.create(name="streaming")
    for i in range(36):  # each text several times, in different chunks and sub-batches
        image = Image.objects.create(collection=collection, external_id=f"s{i}", status="missing")
        Caption.objects.create(image=image, text=TEXTS[i % len(TEXTS)], origin="alt_text")
        if i % 4 == 0:
            Caption.objects.create(image=image, text=TEXTS[(i + 3) % len(TEXTS)], origin="alt_text")
    return collection


def test_streamed_sub_batches_write_the_decisions_of_the_plain_path(collection, monkeypatch):
    plain = _run(collection, sub_batch=10_000, chunk_images=1000, monkeypatch=monkeypatch, step_by_step=True)
    executor_steps.clear_decision_cache()
    streamed = _run(collection, sub_batch=4, chunk_images=12, monkeypatch=monkeypatch)
    assert streamed.chunks_total == 3 and streamed.chunks_done == 3
    expected, found = _decisions(plain), _decisions(streamed)
    assert len(found) == len(expected) > 36 * 5
    assert found == expected
    assert [t for _, t in _children(streamed)] == [t for _, t in _children(plain)]
    assert {row["filter"]: row["dropped"] for row in streamed.funnel} == {row["filter"]: row["dropped"] for row in plain.funnel}
    tabbed = FilterDecision.objects.filter(run=streamed, filter_name="boilerplate_crop", caption__text=TEXTS[8])
    assert tabbed.count() == Caption.objects.filter(image__collection=collection, text=TEXTS[8]).count() >= 3
    assert {d.text_before for d in tabbed} == {TEXTS[8]}
    # The crop's removed span is relative to the caption's raw text, on every copy of the caption.
    cropped = FilterDecision.objects.filter(run=streamed, filter_name="boilerplate_crop", reason="cropped",
                                            caption__text=TEXTS[1])
    assert cropped.count() == Caption.objects.filter(image__collection=collection, text=TEXTS[1]).count() > 1
    assert all(d.details["removed_spans"] == [[0, len("Stock photo ")]] for d in cropped)


def test_a_rerun_chunk_writes_nothing_twice_and_a_failing_sub_batch_writes_nothing(collection, monkeypatch):
    run = _run(collection, sub_batch=4, chunk_images=12, monkeypatch=monkeypatch)
    before = FilterDecision.objects.filter(run=run).count()
    chunk = run.chunks.order_by("index").first()
    executor.process_chunk(run, chunk.item_ids)  # a re-delivered task: through ON CONFLICT DO NOTHING
    assert FilterDecision.objects.filter(run=run).count() == before

    from django.db import connection

    from curation.pipeline.text_filters import ProfanityFilter

    if connection.vendor != "postgresql":
        pytest.skip("sub-batches stream into an open COPY on PostgreSQL only: SQLite decides a chunk in one batch")
    calls = []

    def boom(self, items):
        calls.append(len(items))
        if len(calls) == 2:
            raise RuntimeError("boom in the second sub-batch")
        return original(self, items)

    original = ProfanityFilter.apply_distinct  # what the executor calls with one item per distinct text
    monkeypatch.setattr(ProfanityFilter, "apply_distinct", boom)
    executor_steps.clear_decision_cache()
    pipeline = Pipeline.objects.create(name="failing", steps=[{"filter": s} for s in STEPS])
    failing = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(failing.pk, enqueue=lambda *a: None)
    first = failing.chunks.order_by("index").first()
    with pytest.raises(executor.PipelineError, match="boom"):
        executor.run_chunk(failing.pk, first.index)
    assert not FilterDecision.objects.filter(run=failing).exists()
    first.refresh_from_db()
    assert first.status == RunChunk.Status.RUNNING


# A transform that is not decided by the text alone (hypernymization) runs first: the captions it changed
# reach the text-only group with a text that is no longer their raw text, and go through it step by
# step; the others are decided once per distinct text. Both must write what the step-by-step path writes.
MIXED = ["boilerplate_drop", "hypernymize", "boilerplate_crop", "caption_length", "pos_presence", "capitalisation"]


def test_groups_decided_per_distinct_text_write_the_decisions_of_the_step_by_step_path(collection, monkeypatch):
    executor_steps.clear_decision_cache()
    stepwise = _run(collection, sub_batch=10_000, chunk_images=1000, monkeypatch=monkeypatch, steps=MIXED,
                    step_by_step=True)
    executor_steps.clear_decision_cache()
    grouped = _run(collection, sub_batch=4, chunk_images=12, monkeypatch=monkeypatch, steps=MIXED)
    expected, found = _decisions(stepwise), _decisions(grouped)
    assert len(found) == len(expected) > 36 * 3
    assert found == expected
    assert [t for _, t in _children(grouped)] == [t for _, t in _children(stepwise)]
    # Hypernymization changed the Tom Hanks caption before the group: it took the step-by-step road
    # and its chain of children (hypernymized) is the same on both paths.
    changed = FilterDecision.objects.filter(run=grouped, filter_name="hypernymize", caption__text=TEXTS[0]).first()
    assert changed.text_after and changed.text_after != TEXTS[0]
    assert "Tom Hanks" not in changed.text_after


def test_deleting_a_caption_an_image_or_a_collection_deletes_their_decisions(collection, monkeypatch):
    """The decisions table has no foreign-key triggers (see FilterDecision): Django's collector cascades."""
    run = _run(collection, sub_batch=4, chunk_images=12, monkeypatch=monkeypatch)
    caption = Caption.objects.filter(image__collection=collection, text=TEXTS[0]).first()
    assert FilterDecision.objects.filter(caption=caption).exists()
    caption.delete()
    assert not FilterDecision.objects.filter(caption_id=caption.pk).exists()
    image = Image.objects.filter(collection=collection).first()
    assert FilterDecision.objects.filter(image=image).exists()
    image.delete()
    assert not FilterDecision.objects.filter(image_id=image.pk).exists()
    # A caption with a derived (cropped) caption cannot go alone, but its collection takes the chain along.
    parent = Caption.objects.filter(image__collection=collection, text=TEXTS[10]).first()
    assert parent.children.exists()
    with pytest.raises(RestrictedError):
        parent.delete()
    collection.delete()
    assert not Caption.objects.filter(pk=parent.pk).exists()
    assert not FilterDecision.objects.filter(run_id=run.pk).exists()


def test_chunks_of_interleaved_collections_load_their_own_images_and_captions_only(monkeypatch):
    """Two collections imported in turns: each chunk's image ids have gaps held by the other collection's
    images, whose captions must not be read (the loader selects the id range and, with gaps, the ids)."""
    mine, theirs = Collection.objects.create(name="mine"), Collection.objects.create(name="theirs")
    for i in range(12):
        for collection, text in ((mine, TEXTS[i % 4]), (theirs, "A caption of another collection entirely")):
            image = Image.objects.create(collection=collection, external_id=f"{collection.name}{i}", status="missing")
            Caption.objects.create(image=image, text=text, origin="alt_text")
    run = _run(mine, sub_batch=4, chunk_images=5, monkeypatch=monkeypatch)
    decided = set(FilterDecision.objects.filter(run=run).values_list("image_id", flat=True))
    assert decided == set(Image.objects.filter(collection=mine).values_list("pk", flat=True))
    first_step = FilterDecision.objects.filter(run=run, step=0)
    assert sorted(first_step.values_list("caption_id", flat=True)) == sorted(
        Caption.objects.filter(image__collection=mine).values_list("pk", flat=True))
    assert run.status == "done" and run.chunks_total == 3 and run.chunks_done == 3


def test_contiguous_and_gapped_chunks_load_the_same_rows():
    collection = Collection.objects.create(name="ranges")
    images = [Image.objects.create(collection=collection, external_id=f"r{i}", status="missing") for i in range(6)]
    for image in images:
        Caption.objects.create(image=image, text=f"A caption for image {image.external_id}", origin="alt_text")
    ids = [image.pk for image in images]
    whole_images, whole_captions = executor.load_items(ids)
    assert sorted(whole_images) == ids and [it.image_id for it in whole_captions] == ids
    gapped = ids[::2]
    some_images, some_captions = executor.load_items(gapped)
    assert sorted(some_images) == gapped and [it.image_id for it in some_captions] == gapped


# The conceptual-captions preset's text path: the text-only group, then label overlap (images without labels:
# not applicable, no parse needed) and hypernymization (decided once per distinct working text, its removed
# spans placed per caption), then the run-level rare-entity filter. Duplicates in later chunks are neither
# parsed nor rewritten again, and the decisions and children are those of the step-by-step path.
PRESET_TEXT = STEPS + ["label_overlap", "hypernymize", "rare_entity_types"]


def test_the_preset_text_path_parses_each_distinct_text_once_and_writes_the_step_by_step_decisions(
        collection, monkeypatch):
    parsed = []
    parse_unique = nlp.parse_unique

    def counting(texts, needs, batch_size=256):
        found = parse_unique(texts, needs, batch_size)
        parsed.extend(found)
        return found

    executor_steps.clear_decision_cache()
    stepwise = _run(collection, sub_batch=10_000, chunk_images=1000, monkeypatch=monkeypatch, steps=PRESET_TEXT,
                    step_by_step=True)
    monkeypatch.setattr(nlp, "parse_unique", counting)
    nlp.DOC_CACHE.clear()
    executor_steps.clear_decision_cache()
    keyed = _run(collection, sub_batch=4, chunk_images=12, monkeypatch=monkeypatch, steps=PRESET_TEXT)
    assert keyed.chunks_total == 3
    expected, found = _decisions(stepwise), _decisions(keyed)
    assert len(found) == len(expected) > 36 * 5
    assert found == expected
    assert _children(keyed) and [t for _, t in _children(keyed)] == [t for _, t in _children(stepwise)]
    # Every distinct working text was parsed once, though each recurs in all three chunks.
    assert len(parsed) == len(set(parsed)), [t for t in set(parsed) if parsed.count(t) > 1]
    hypernymized = FilterDecision.objects.filter(run=keyed, filter_name="hypernymize")
    assert {d.caption.image.collection_id for d in hypernymized} == {collection.pk}
    assert hypernymized.count() > len(set(hypernymized.values_list("text_before", flat=True)))
    # The cropped caption's hypernymization spans sit after the cropped prefix in its raw text.
    cropped = hypernymized.filter(caption__text=TEXTS[10])
    assert cropped.count() > 1
    for decision in cropped:
        assert decision.text_before == TEXTS[10][len("Stock photo: "):]
        spans = decision.details["removed_spans"]
        assert spans and all(start >= len("Stock photo: ") for start, _ in spans)
        # hypernymize v3 drops a place hanging on a noun with its preposition ("the mayor of Boston" -> "the mayor")
        assert "of Boston" in {TEXTS[10][start:end].strip() for start, end in spans}
    overlap = FilterDecision.objects.filter(run=keyed, filter_name="label_overlap")
    assert set(overlap.values_list("outcome", "reason")) == {("na", "no_labels")}


def test_a_text_keyed_step_that_leaves_the_spans_alone_keeps_those_of_the_crop(collection, monkeypatch):
    """Hypernymization drops a text too long to rewrite without touching its removed spans: the crop's spans stay
    on every copy of the caption, as on the step-by-step path."""
    # label overlap (not decided by the text alone) in between: hypernymization takes the text-keyed road.
    steps = [{"filter": "boilerplate_crop"}, {"filter": "label_overlap"},
             {"filter": "hypernymize", "params": {"max_chars": 30}}]

    def run(step_by_step):
        monkeypatch.setattr(Hypernymize, "text_keyed", not step_by_step)
        monkeypatch.setattr(executor_steps, "memoisable", (lambda step, flt: False) if step_by_step else MEMOISABLE)
        monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 1000 if step_by_step else 12)
        executor_steps.clear_decision_cache()
        pipeline = Pipeline.objects.create(name=f"long{Pipeline.objects.count()}", steps=steps)
        run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
        executor.start(run.pk, enqueue=lambda *a: None)
        for chunk in RunChunk.objects.filter(run=run).order_by("index"):
            executor.run_chunk(run.pk, chunk.index)
        return run

    stepwise, keyed = run(True), run(False)
    assert _decisions(keyed) == _decisions(stepwise)
    long = FilterDecision.objects.filter(run=keyed, filter_name="hypernymize", caption__text=TEXTS[10])
    assert long.count() > 1
    assert {d.reason for d in long} == {"too_long"}
    assert all(d.details["removed_spans"] == [[0, len("Stock photo: ")]] for d in long)


class _NotPostgres:
    """The executor's view of the database connection, as on SQLite (the embedded default): no COPY, the ORM
    paths for loading, decision rows and child captions. Everything but ``vendor`` is the real connection."""

    vendor = "sqlite"

    def __getattr__(self, name):
        from django.db import connection

        return getattr(connection, name)


def test_the_embedded_default_writes_every_row_of_a_group_and_the_children(collection, monkeypatch):
    """Without COPY (bulk_create) every row of a group's caption (one row per step) is written: the same
    decisions and child captions as on PostgreSQL, each with an empty override."""
    executor_steps.clear_decision_cache()
    expected = _run(collection, sub_batch=4, chunk_images=12, monkeypatch=monkeypatch, steps=PRESET_TEXT)
    for module in (chunks, decisions, items, funnel):  # each module of the executor that asks the connection
        monkeypatch.setattr(module, "connection", _NotPostgres())
    executor_steps.clear_decision_cache()
    embedded = _run(collection, sub_batch=4, chunk_images=12, monkeypatch=monkeypatch, steps=PRESET_TEXT)
    assert _decisions(embedded) == _decisions(expected)
    assert [t for _, t in _children(embedded)] == [t for _, t in _children(expected)]
    assert set(FilterDecision.objects.filter(run=embedded).values_list("override", flat=True)) == {""}
    assert [row["entered"] for row in embedded.funnel] == [row["entered"] for row in expected.funnel]
    assert embedded.funnel[0]["entered"] == Caption.objects.filter(image__collection=collection).exclude(
        origin="transformed").count()
