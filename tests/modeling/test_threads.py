"""Torch threads in the workers: TORCH_THREADS, else the worker's share of the cores, overridden by a run's
torch_threads; applied by the training, embedding and generation tasks and set in docker-compose."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from modeling import engine, tasks, threads
from modeling.models import TrainingRun

pytestmark = pytest.mark.django_db

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


@pytest.fixture
def seen_threads(tiny, monkeypatch):
    """The torch thread count the tiny trainer sees while it prepares its data."""
    seen = []
    prepare = tiny.prepare

    def watching(run):
        seen.append(torch.get_num_threads())
        return prepare(run)

    monkeypatch.setattr(tiny, "prepare", watching)
    return seen


@pytest.fixture
def worker(monkeypatch):
    """A worker on 8 cores started with ``--concurrency 4``."""
    monkeypatch.setattr(threads, "_cores", lambda: 8)
    monkeypatch.delenv(threads.CONCURRENCY_ENV, raising=False)
    threads.remember_concurrency(sender="gpu@host", options={"concurrency": 4})
    yield
    monkeypatch.delenv(threads.CONCURRENCY_ENV, raising=False)


def train(**config) -> TrainingRun:
    run = engine.create_run("test-tiny", {"epochs": 1, **config})
    return engine.train(run.pk)


def test_a_run_uses_the_torch_threads_setting(seen_threads, settings):
    before = torch.get_num_threads()
    settings.TORCH_THREADS = 1
    run = train()
    assert run.status == TrainingRun.Status.DONE
    assert seen_threads == [1] and "1 torch thread(s) (TORCH_THREADS)" in run.log
    assert torch.get_num_threads() == before  # the process's own setting comes back after the run


def test_a_runs_torch_threads_overrides_the_setting(seen_threads, settings):
    settings.TORCH_THREADS = 1
    run = train(torch_threads=2)
    assert seen_threads == [2] and "2 torch thread(s) (the run's torch_threads)" in run.log


def test_without_a_setting_a_worker_takes_its_share_of_the_cores(seen_threads, settings, worker):
    settings.TORCH_THREADS = 0
    assert threads.worker_share() == 2 and threads.default_threads() == 2
    run = train()
    assert seen_threads == [2] and "the worker's share of 8 cores" in run.log


def test_a_worker_with_celerys_default_concurrency_takes_one_thread(monkeypatch, settings):
    settings.TORCH_THREADS = 0
    monkeypatch.setattr(threads, "_cores", lambda: 16)
    monkeypatch.delenv(threads.CONCURRENCY_ENV, raising=False)  # so the variable is unset again afterwards
    threads.remember_concurrency(options={"concurrency": None})
    try:
        assert threads.default_threads() == 1
    finally:
        monkeypatch.delenv(threads.CONCURRENCY_ENV)
    assert threads.default_threads() == 16  # outside a worker (manage.py train): every core


def test_the_embedding_task_runs_with_the_setting(monkeypatch, settings):
    from pack.embeddings import jobs

    settings.TORCH_THREADS = 1
    seen = []

    class Done:
        class Status:
            RUNNING = "running"
        status = "done"

    monkeypatch.setattr(jobs, "job_run", lambda job_id: seen.append(torch.get_num_threads()) or Done())
    assert tasks.embed_collection.run(7) == "done" and seen == [1]


def test_docker_compose_sets_torch_threads_for_both_workers():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    for name in ("worker", "gpu-worker"):
        assert "TORCH_THREADS" in services[name]["environment"], name
