"""Finalising a run and overriding one of its decisions at the same time, on PostgreSQL with real commits:
the funnel the run ends with counts the override whichever commits first."""
import threading

import pytest
from django.db import connection

from curation.models import FilterDecision, FilterRun, Pipeline, RunChunk
from curation.pipeline import executor
from curation.pipeline.executor import funnel
from curation.services import decision_override, run_create

from ..conftest import REQUIRE_SERVICES
from .test_executor import STEPS  # also registers the test filters

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        message = "the funnel lock is a PostgreSQL advisory lock: set DATABASE_URL=postgres://..."
        if REQUIRE_SERVICES:
            pytest.fail(message)
        pytest.skip(message)


def _thread(name, target, errors):
    def wrapped():
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=wrapped, name=name)
    thread.start()
    return thread


def _first_chunk_done(collection, monkeypatch, name):
    """A run in two chunks with the first done: (the run, its second chunk, a decision of the first)."""
    monkeypatch.setattr("curation.pipeline.executor.planning.CHUNK_IMAGES", 2)
    run = run_create(collection=collection, pipeline=Pipeline.objects.create(name=name, steps=STEPS), enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    first, second = RunChunk.objects.filter(run=run).order_by("index")
    executor.run_chunk(run.pk, first.index)
    return run, second, FilterDecision.objects.get(run=run, reason="too_narrow")


def _assert_done_counting_the_override(run, compute_funnel):
    run.refresh_from_db()
    assert run.status == FilterRun.Status.DONE
    assert run.funnel == compute_funnel(run)
    assert {row["filter"]: (row["kept"], row["dropped"]) for row in run.funnel}["test_wide_enough"] == (3, 0)


def test_an_override_saved_while_the_last_chunk_finalises_the_run_is_in_its_funnel(collection, monkeypatch, alice):
    run, second, narrow = _first_chunk_done(collection, monkeypatch, "race")

    # Hold finalise between counting the funnel and saving it, while the override is made: the window in
    # which an unserialised override is lost.
    read, go = threading.Event(), threading.Event()
    count = funnel.compute_funnel

    def held(run_):
        counted = count(run_)
        if threading.current_thread().name == "finalise":
            read.set()
            assert go.wait(timeout=30)
        return counted

    monkeypatch.setattr(funnel, "compute_funnel", held)
    errors: list = []
    finishing = _thread("finalise", lambda: executor.run_chunk(run.pk, second.index), errors)
    assert read.wait(timeout=30), errors
    overriding = _thread("override", lambda: decision_override(decision=narrow, outcome="keep", note="wide enough",
                                                               user=alice), errors)
    try:
        overriding.join(timeout=1.0)
        assert overriding.is_alive(), "the override did not wait for the run being finalised"
    finally:
        go.set()
    finishing.join(timeout=30)
    overriding.join(timeout=30)
    assert not finishing.is_alive() and not overriding.is_alive() and not errors, errors

    _assert_done_counting_the_override(run, executor.compute_funnel)


def test_finalise_waits_for_an_override_being_saved_and_recounts(collection, monkeypatch, alice):
    run, second, narrow = _first_chunk_done(collection, monkeypatch, "race2")

    # Hold the override inside its transaction (its review made, not committed) while the run finalises.
    inside, go = threading.Event(), threading.Event()
    recount = funnel.compute_funnel

    def held(run_):
        if threading.current_thread().name == "override":
            inside.set()
            assert go.wait(timeout=30)
        return recount(run_)

    monkeypatch.setattr(funnel, "compute_funnel", held)
    errors: list = []
    overriding = _thread("override", lambda: decision_override(decision=narrow, outcome="keep", note="wide enough",
                                                               user=alice), errors)
    assert inside.wait(timeout=30), errors
    finishing = _thread("finalise", lambda: executor.run_chunk(run.pk, second.index), errors)
    try:
        finishing.join(timeout=1.0)
        assert finishing.is_alive(), "finalise did not wait for the override being saved"
    finally:
        go.set()
    overriding.join(timeout=30)
    finishing.join(timeout=30)
    assert not finishing.is_alive() and not overriding.is_alive() and not errors, errors

    _assert_done_counting_the_override(run, recount)
