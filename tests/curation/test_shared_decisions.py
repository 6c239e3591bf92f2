"""The workers of a run share the decisions of repeated texts through Redis (curation/pipeline/shared.py).

Each chunk here runs as if in a worker of its own (the process's decision cache emptied before it), so a
repeated text's decision can only come from what an earlier chunk's worker published. The decisions and
the hypernymized child captions written must be those of one worker with the tier off; only texts that
repeat in the collection are ever published; the keys go when the run ends; Redis failing changes
nothing but speed."""
import logging
import os

import pytest

from curation.models import Caption, Collection, FilterDecision, Image, Pipeline, RunChunk
from curation.pipeline import executor, shared
from curation.services import run_create

pytestmark = pytest.mark.django_db

# Seed 002's alt-texts (Table 1, Figure 1) and variants with other names, places and dates; boilerplate that
# the crop removes; a French caption for the language filter.
REPEATED = [
    "Harrison Ford and Calista Flockhart attend the premiere of 'Hollywood Homicide' at the 29th American Film "
    "Festival September 5, 2003 in Deauville, France.",
    "A Pakistani worker helps to clear the debris from the Taj Mahal Hotel November 7, 2005 in Balakot, Pakistan.",
    "Musician Justin Timberlake performs at the 2017 Pilgrimage Music & Cultural Festival on September 23, 2017 "
    "in Franklin, Tennessee.",
    "Stock photo: Emma Stone and Ryan Gosling attend the premiere of 'La La Land' on August 31, 2016 in Venice, Italy",
    "Side view of a British Airways Airbus A319 aircraft on approach to land with landing gear down",
    "Une maison près du vieux pont sur la rivière, au coucher du soleil.",
    "Sale sale cheap sale",
]
STEPS = ["boilerplate_drop", "boilerplate_crop", "caption_length", "language", "pos_presence", "noun_ratio",
         "unique_word_ratio", "token_repetition", "capitalisation", "unknown_tokens", "polarity", "profanity",
         "label_overlap", "hypernymize"]  # the conceptual-captions preset's text path
HYPERNYMIZE = STEPS.index("hypernymize")


def unique_text(i: int) -> str:
    return f"A red tractor number {i} stands in a wheat field near the barn of farm {i}."


@pytest.fixture
def redis_url(settings):
    url = os.environ.get("REDIS_URL")
    if not url:
        if os.environ.get("CAPTIONLAB_REQUIRE_SERVICES") == "1":
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but REDIS_URL is not set")
        pytest.skip("REDIS_URL is not set: no Redis for the shared decisions")
    settings.REDIS_URL = url
    settings.FILTER_SHARED_DECISIONS = True
    shared._client, shared._down_until = None, 0.0
    yield url
    shared._client, shared._down_until = None, 0.0


@pytest.fixture
def collection():
    collection = Collection.objects.create(name="shared decisions")
    for i in range(30):  # each repeated text in several chunks; every fifth image with a text of its own
        image = Image.objects.create(collection=collection, external_id=f"img{i}", status="missing")
        Caption.objects.create(image=image, text=REPEATED[i % len(REPEATED)], origin="alt_text")
        if i % 5 == 0:
            Caption.objects.create(image=image, text=unique_text(i), origin="alt_text")
    return collection


def run_chunks(collection, monkeypatch, *, separate_workers: bool):
    monkeypatch.setattr(executor, "CHUNK_IMAGES", 6)
    monkeypatch.setattr(executor, "SUB_BATCH_CAPTIONS", 4)
    pipeline = Pipeline.objects.create(name=f"p{Pipeline.objects.count()}", steps=[{"filter": s} for s in STEPS])
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor._DECISION_CACHE[:] = [{}, {}]
    executor.start(run.pk, enqueue=lambda *a: None)
    for chunk in RunChunk.objects.filter(run=run).order_by("index"):
        if separate_workers:
            executor._DECISION_CACHE[:] = [{}, {}]
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    assert run.status == run.Status.DONE and run.chunks_done == run.chunks_total == 5
    assert run.funnel == executor.compute_funnel(run)
    return run


def decisions(run):
    return sorted(FilterDecision.objects.filter(run=run).values_list(
        "step", "filter_name", "image_id", "caption_id", "outcome", "score", "reason", "details", "text_before",
        "text_after"), key=lambda row: (row[0], row[2], row[3] or 0))


def children(run):
    """(image, parent's text, text) of the run's transformed captions (a chain's parents are the run's own)."""
    return sorted(Caption.objects.filter(origin="transformed", source__startswith=f"run {run.pk}:")
                  .values_list("image_id", "parent__text", "text"))


def test_workers_fetch_what_others_decided_and_write_what_one_worker_writes(collection, redis_url, settings,
                                                                          monkeypatch):
    settings.FILTER_SHARED_DECISIONS = False
    alone = run_chunks(collection, monkeypatch, separate_workers=False)
    settings.FILTER_SHARED_DECISIONS = True

    kept: dict[str, dict] = {}
    forget = shared.forget

    def inspect_then_forget(run, positions):  # look at what was published, then let the run delete it
        client = shared._redis()
        ns = shared.namespace(run)
        kept.update({key.decode(): client.hgetall(key) for key in client.scan_iter(f"{ns}:*")
                     if client.type(key) == b"hash"})
        kept["repeated"] = client.smembers(f"{ns}:repeated")
        forget(run, positions)
        assert not list(client.scan_iter(f"{ns}:*")), "the run's shared keys outlive it"

    monkeypatch.setattr(shared, "forget", inspect_then_forget)
    before = dict(shared.STATS)
    together = run_chunks(collection, monkeypatch, separate_workers=True)
    fetched = shared.STATS["fetched"] - before["fetched"]
    published = shared.STATS["published"] - before["published"]

    expected, found = decisions(alone), decisions(together)
    assert len(found) == len(expected) > 36 * 5
    assert found == expected
    assert children(together) == children(alone)
    assert any(source.startswith(f"run {together.pk}: hypernymize") for source in Caption.objects.filter(
        origin="transformed").values_list("source", flat=True)), "no caption was hypernymized"

    # The repeated set holds the collection's repeated texts and no other.
    assert {h.decode() for h in kept["repeated"]} == {
        shared.short_hash(Caption.objects.filter(text=t).first().text_hash) for t in REPEATED}
    # Published: the text filters' group (by raw text), hypernymization's group (captions still with their raw
    # text) and its text-keyed decisions (the captions the crop changed, by their working text).
    ns = shared.namespace(together)
    group, hyper, keyed = kept[f"{ns}:group:0"], kept[f"{ns}:group:{HYPERNYMIZE}"], kept[f"{ns}:keyed:{HYPERNYMIZE}"]
    assert set(group) == {shared._field(t) for t in REPEATED}
    assert set(keyed) == {shared._field(REPEATED[3][len("Stock photo: "):])}
    assert hyper and set(hyper) < set(group)
    assert published == len(group) + len(hyper) + len(keyed)
    assert not any(shared._field(unique_text(i)) in entries for i in range(0, 30, 5) for entries in kept.values())
    # Five chunks, each in a worker of its own: every chunk after the first finds the repeated texts decided.
    assert fetched >= 4 * len(REPEATED)


def test_redis_failing_changes_no_decision(collection, redis_url, settings, monkeypatch, caplog):
    settings.FILTER_SHARED_DECISIONS = False
    alone = run_chunks(collection, monkeypatch, separate_workers=False)
    settings.FILTER_SHARED_DECISIONS = True
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    shared._client = None
    with caplog.at_level(logging.WARNING, logger="curation.pipeline.shared"):
        broken = run_chunks(collection, monkeypatch, separate_workers=True)
    assert decisions(broken) == decisions(alone)
    assert children(broken) == children(alone)
    assert "Redis failed" in caplog.text and "goes on with its own cache" in caplog.text


def test_a_chunk_of_a_run_without_repeated_texts_asks_redis_nothing_per_caption(collection, redis_url,
                                                                              monkeypatch):
    pipeline = Pipeline.objects.create(name="no repeats", steps=[{"filter": s} for s in STEPS])
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)  # not started: nothing published
    asked = []
    client = shared._redis()
    monkeypatch.setattr(client, "smismember", lambda *a, **k: asked.append(a))
    assert shared.RunShare.open(run, ["ab" * 32, "cd" * 32]) == (None, [False, False])
    assert asked == []


def test_off_without_redis_or_when_switched_off(settings):
    settings.REDIS_URL = ""
    assert not shared.enabled()
    assert shared.RunShare.open(None, ["ab" * 32]) == (None, [False])
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    settings.FILTER_SHARED_DECISIONS = False
    assert not shared.enabled()


def test_a_run_publishes_at_most_the_configured_number_of_repeated_texts(collection, redis_url, settings,
                                                                        monkeypatch):
    settings.FILTER_SHARED_DECISIONS_MAX_TEXTS = 3
    seen = {}
    monkeypatch.setattr(shared, "forget", lambda run, positions: seen.setdefault(
        "size", shared._redis().scard(f"{shared.namespace(run)}:repeated")))
    run = run_chunks(collection, monkeypatch, separate_workers=True)
    assert seen["size"] == 3
    shared._redis().delete(f"{shared.namespace(run)}:repeated")
