"""The model-based fits (Dawid-Skene, GLAD, MACE, Bradley-Terry, ROVER) in a process of their own, as
production runs them (ANNOTATION_MODELS_PROCESS="subprocess"): the same rows and figures as
fitting in the calling process, crowd-kit never imported by the caller, and a failed or stuck
child reported as such with every other figure kept."""
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from annotation.aggregation import aggregate_campaign, aggregate_changes, methods
from annotation.models import Aggregate, Membership, Task

from .test_aggregation import cast, setup

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def snapshot(campaign):
    rows = sorted((a.task_id, a.part, a.method, json.dumps(a.label), a.confidence, a.n_votes,
                   json.dumps(a.details, sort_keys=True))
                  for a in Aggregate.objects.filter(task__campaign=campaign))
    reliability = dict(Membership.objects.filter(campaign=campaign).values_list("worker_id", "reliability"))
    return rows, reliability


def without_times(stats):
    drop = {"computed_at", "models_computed_at", "incremental"}
    return {k: v for k, v in stats.items() if k not in drop}


def planted_campaign(make_campaign, django_user_model):
    """120 GOOD/BAD items, 5 annotators of planted accuracy (the last one a coin-flipping spammer)."""
    accuracies = [0.95, 0.9, 0.8, 0.7, 0.5]
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 120, 5, votes_per_item=5)
    rng = np.random.default_rng(7)
    truth = rng.choice(["good", "bad"], size=len(tasks))
    table = [[{"label": t if rng.random() < a else ("bad" if t == "good" else "good")} for a in accuracies]
             for t in truth]
    cast(campaign, tasks, workers, table)
    return campaign, tasks, workers, truth


def test_a_child_process_gives_the_same_rows_as_fitting_inline(make_campaign, django_user_model, settings):
    campaign, tasks, workers, truth = planted_campaign(make_campaign, django_user_model)
    settings.ANNOTATION_MODELS_PROCESS = "subprocess"
    child = aggregate_campaign(campaign.pk)
    child_rows = snapshot(campaign)
    settings.ANNOTATION_MODELS_PROCESS = "inline"
    inline = aggregate_campaign(campaign.pk)
    assert child_rows == snapshot(campaign)
    assert without_times(child) == without_times(inline)
    assert {"dawid_skene", "glad", "mace"} <= set(child["methods"]) and not child["notes"]
    ds = {a.task_id: a.label for a in Aggregate.objects.filter(task__campaign=campaign, method="dawid_skene")}
    mv = {a.task_id: a.label for a in Aggregate.objects.filter(task__campaign=campaign, method="majority")}
    ds_accuracy = np.mean([ds[t.pk] == truth[i] for i, t in enumerate(tasks)])
    assert ds_accuracy >= np.mean([mv[t.pk] == truth[i] for i, t in enumerate(tasks)]) and ds_accuracy >= 0.9
    estimated = [child_rows[1][w.pk] for w in workers]
    assert estimated[0] > estimated[-1] and estimated[-1] < 0.65  # the spammer found


def test_bradley_terry_in_the_child_ranks_the_candidates(make_campaign, django_user_model, settings):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "relevance_fluency", 1, 3,
                                     collection_args={"captions_per_image": 3})
    (task,) = tasks
    a, b, c = (str(x) for x in task.candidates)

    def vote(ra, rb, rc):
        return {"ratings": {a: {"relevance": ra, "fluency": 3}, b: {"relevance": rb, "fluency": 4},
                            c: {"relevance": rc, "fluency": 2}}}

    cast(campaign, tasks, workers, [[vote(5, 3, 1), vote(4, 4, 2), vote(5, 2, 3)]])
    settings.ANNOTATION_MODELS_PROCESS = "subprocess"
    aggregate_campaign(campaign.pk)
    bt = {x.part: x for x in Aggregate.objects.filter(task=task, method="bradley_terry")}
    assert bt[f"{a}:relevance"].details["rank"] == 1
    assert bt[f"{b}:fluency"].details["rank"] == 1 and bt[f"{c}:fluency"].details["rank"] == 3
    child = snapshot(campaign)
    settings.ANNOTATION_MODELS_PROCESS = "inline"
    aggregate_campaign(campaign.pk)
    assert child == snapshot(campaign)


def test_the_caller_never_imports_crowd_kit():
    """In a fresh interpreter with Django set up: a fit through the child leaves crowd-kit, scipy
    and scikit-learn out of the caller's modules, and the results come back."""
    script = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ["ANNOTATION_MODELS_PROCESS"] = "subprocess"
import django
django.setup()
import pandas as pd
from annotation.aggregation.methods import fit
data = pd.DataFrame({"worker": [1, 2, 3, 1, 2, 3], "task": [0, 0, 0, 1, 1, 1],
                     "label": ["good", "good", "bad", "bad", "bad", "bad"]})
written = pd.DataFrame({"worker": [1, 2, 3], "task": [0, 0, 0],
                        "text": ["a dog runs on the beach", "a dog runs on a beach", "a dog runs on the beach"]})
out, rover = fit([("categorical", {"data": data, "ds_iterations": 50, "slow": False}), ("rover", {"data": written})])
heavy = sorted(m for m in ("crowdkit", "scipy", "sklearn", "nltk") if m in sys.modules)
print(out["dawid_skene"]["label"].tolist(), rover["texts"], heavy)
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "ANNOTATION_MODELS_PROCESS"}
    env["DATABASE_URL"] = "sqlite:///:memory:"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['good', 'bad'] {0: 'a dog runs on the beach'} []"


@pytest.mark.parametrize("failure", ["exit", "timeout"])
def test_a_failed_child_is_reported_and_the_other_figures_kept(make_campaign, django_user_model, settings,
                                                               monkeypatch, failure):
    campaign, tasks, workers, truth = planted_campaign(make_campaign, django_user_model)
    settings.ANNOTATION_MODELS_PROCESS = "subprocess"
    if failure == "exit":  # the child dies at once (an interpreter that fails, an out-of-memory kill)
        monkeypatch.setattr(methods, "sys", SimpleNamespace(executable="/bin/false"))
    else:
        settings.ANNOTATION_MODELS_TIMEOUT = 0.01
    stats = aggregate_campaign(campaign.pk)
    reason = "exited with status 1" if failure == "exit" else "ran past ANNOTATION_MODELS_TIMEOUT"
    assert any(n.startswith("dawid_skene (label): failed: ") and reason in n for n in stats["notes"]), stats["notes"]
    assert any(n.startswith("glad (label): failed: ") for n in stats["notes"])
    majority = {a.task_id: a.label for a in Aggregate.objects.filter(task__campaign=campaign, method="majority")}
    ds = Aggregate.objects.filter(task__campaign=campaign, method="dawid_skene")
    assert ds.count() == len(tasks) and all(a.label == majority[a.task_id] for a in ds)
    assert all(a.details["fallback"] == "majority" for a in ds)
    assert stats["agreement"]["alpha"] is not None and stats["n_votes"] == 5 * len(tasks)
    assert Task.objects.filter(campaign=campaign).count() >= len(tasks)


WRITTEN = [  # three annotators' captions of four photos; the third writer is careless
    ["a brown dog runs along the beach", "a brown dog running along the beach", "dog"],
    ["two children fly a red kite in a park", "two kids fly a red kite in the park", "kite kite"],
    ["a plate of pasta with tomato sauce", "pasta with tomato sauce on a white plate", "food"],
    ["an old man reads a newspaper on a bench", "an old man reading a newspaper on a bench", "a man"],
]


def test_rover_runs_in_the_model_process_and_the_per_task_pass_shows_the_representative(
        make_campaign, django_user_model, settings):
    """ROVER (crowd-kit) is a model-pass method: the per-task pass after each vote writes the
    representative caption, marked pending; the model pass, through the child, writes ROVER's text,
    the same as fitting inline."""
    campaign, tasks, workers = setup(make_campaign, django_user_model, "write", 4, 3)
    cast(campaign, tasks, workers, [[{"text": t} for t in row] for row in WRITTEN])
    aggregate_changes(campaign.pk)
    pending = {a.task_id: a for a in Aggregate.objects.filter(task__campaign=campaign, method="rover")}
    assert [pending[t.pk].label for t in tasks] == [
        "a brown dog runs along the beach", "two children fly a red kite in a park",
        "a plate of pasta with tomato sauce", "an old man reads a newspaper on a bench"]
    assert all(a.details["rover"] == "pending" and a.n_votes == 3 for a in pending.values())

    settings.ANNOTATION_MODELS_PROCESS = "subprocess"
    child = aggregate_campaign(campaign.pk)
    child_rows = snapshot(campaign)
    rover = {a.task_id: a for a in Aggregate.objects.filter(task__campaign=campaign, method="rover")}
    assert all("rover" not in a.details and "fallback" not in a.details for a in rover.values())
    assert "dog" in rover[tasks[0].pk].label and "kite" in rover[tasks[1].pk].label
    assert rover[tasks[0].pk].details["representative"]["text"] == "a brown dog runs along the beach"
    assert child["methods"] == ["rover"] and not child["notes"]
    settings.ANNOTATION_MODELS_PROCESS = "inline"
    inline = aggregate_campaign(campaign.pk)
    assert snapshot(campaign) == child_rows and without_times(inline) == without_times(child)


def test_a_failed_rover_child_keeps_the_representative_captions(make_campaign, django_user_model, settings,
                                                                 monkeypatch):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "write", 4, 3)
    cast(campaign, tasks, workers, [[{"text": t} for t in row] for row in WRITTEN])
    settings.ANNOTATION_MODELS_PROCESS = "subprocess"
    monkeypatch.setattr(methods, "sys", SimpleNamespace(executable="/bin/false"))
    stats = aggregate_campaign(campaign.pk)
    assert any(n.startswith("rover: failed (the model process exited with status 1") for n in stats["notes"])
    rover = {a.task_id: a for a in Aggregate.objects.filter(task__campaign=campaign, method="rover")}
    assert rover[tasks[2].pk].label == "a plate of pasta with tomato sauce"
    assert all(a.details["fallback"] == "representative" and "rover" not in a.details for a in rover.values())
