"""Generate captions -> evaluation campaign as a job on the gpu queue: the compare page's form, the API
and the CLI make a GenerationJob and queue it; the task captions the images with progress on the job
(done == total at the end) and creates the campaign; a failed job shows its error and makes nothing;
a re-delivered job keeps what was generated; the web process never imports torch."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from annotation.models import Campaign, Task
from curation.models import Caption
from modeling import engine, generation_job, registry
from modeling.generate import generate_captions, generated_captions
from modeling.models import GenerationJob, TrainingRun

from .test_captioning import tiny_release
from .test_generate import SMALL

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_model_cache():
    registry.clear_cache()
    yield
    registry.clear_cache()


def captioners(user, trainers=("captioner-lstm", "captioner-transformer"), n=4):
    release, _, _ = tiny_release(n=n, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    runs = []
    for trainer in trainers:
        run = engine.train(engine.create_run(trainer, dict(SMALL), release=release, user=user).pk)
        assert run.status == TrainingRun.Status.DONE, (run.error, run.log[-2000:])
        runs.append(run)
    test_images = set(release.items.filter(split="test").values_list("image_id", flat=True))
    return runs, test_images


@pytest.mark.django_db
def test_the_compare_form_queues_a_job_that_generates_with_progress_and_makes_the_campaign(
        alice_client, alice, eager_celery, django_capture_on_commit_callbacks):
    runs, test_images = captioners(alice)
    with django_capture_on_commit_callbacks(execute=True) as queued:
        response = alice_client.post(reverse("training-evaluation-campaign"),
                                     {"runs": [r.pk for r in runs], "eval_kind": "relevance_fluency",
                                      "name": "two captioners", "beam_size": "3"})
    job = GenerationJob.objects.get()
    assert len(queued) == 1 and response.status_code == 302
    assert response["Location"] == reverse("generation-job-detail", args=[job.pk])
    assert (job.eval_kind, job.runs, job.options["beam_size"], job.created_by) == \
        ("relevance_fluency", [r.pk for r in runs], 3, alice)
    assert job.status == "done" and job.done == job.total == 2 * len(test_images), job.error
    assert job.started_at <= job.finished_at and job.heartbeat_at
    campaign = job.campaign
    assert campaign.name == "two captioners" and campaign.kind == "relevance_fluency"
    assert campaign.selection["runs"] == [r.pk for r in runs]
    for version in (r.model_version for r in runs):
        captions = list(generated_captions(version))
        assert {c.image_id for c in captions} == test_images
        assert all(len(c.metadata["candidates"]) == 3 for c in captions)  # the beam size asked for
    assert {t.image_id for t in Task.objects.filter(campaign=campaign)} <= test_images

    page = alice_client.get(response["Location"]).content.decode()
    assert 'data-status="done"' in page and "hx-trigger" not in page
    assert f'href="{campaign.get_absolute_url()}"' in page and 'value="100"' in page
    card = alice_client.get(response["Location"], HTTP_HX_REQUEST="true").content.decode()
    assert card.lstrip().startswith("<section") and "<html" not in card


@pytest.mark.django_db
def test_the_api_creates_a_queued_job_and_reads_its_progress(client, alice, bob, eager_celery,
                                                             django_capture_on_commit_callbacks):
    runs, test_images = captioners(alice, trainers=("captioner-lstm",))
    client.force_login(bob)
    assert client.post("/api/generation-jobs/", {"runs": [runs[0].pk]}, content_type="application/json") \
        .status_code == 403
    client.force_login(alice)
    body = {"runs": [runs[0].pk], "eval_kind": "quality", "name": "good or bad"}
    with django_capture_on_commit_callbacks(execute=False) as queued:
        created = client.post("/api/generation-jobs/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    job = created.json()
    assert (job["status"], job["done"], job["total"], job["percent"], job["campaign"]) == ("queued", 0, 0, 0, None)
    assert len(queued) == 1
    queued[0]()  # the commit: the task runs (eagerly here)
    done = client.get(f"/api/generation-jobs/{job['id']}/").json()
    assert (done["status"], done["percent"]) == ("done", 100) and done["done"] == done["total"] == len(test_images)
    assert Task.objects.filter(campaign_id=done["campaign"]).count() == len(test_images)
    assert client.post("/api/generation-jobs/", {"runs": [runs[0].pk], "eval_kind": "relevance_fluency",
                                                 "name": "one run"}, content_type="application/json").json()["field"] \
        == "runs"
    assert client.get("/api/generation-jobs/", {"status": "done"}).json()["count"] == 1
    assert client.get("/api/generation-jobs/", {"colour": "red"}).status_code == 400


@pytest.mark.django_db
def test_a_failed_job_shows_its_error_and_creates_no_campaign(alice_client, alice):
    runs, _ = captioners(alice, trainers=("captioner-lstm",))
    version = runs[0].model_version
    with default_storage.open(version.artifact, "wb") as fh:  # the weights changed after registration
        fh.write(b"PK\x03\x04 not the registered weights")
    job = generation_job.job_create(runs=[runs[0].pk], eval_kind="quality", name="never made", user=alice)
    job = generation_job.job_run(job.pk)
    assert job.status == "failed" and job.campaign is None and job.finished_at
    assert "changed since registration (sha256 mismatch)" in job.error
    assert not Campaign.objects.filter(name="never made").exists()
    assert not Caption.objects.filter(origin=Caption.Origin.MODEL).exists()
    page = alice_client.get(reverse("generation-job-detail", args=[job.pk])).content.decode()
    assert 'data-status="failed"' in page and 'data-role="error"' in page and "sha256 mismatch" in page
    assert "hx-trigger" not in page
    # A finished job is not run again.
    assert generation_job.job_run(job.pk).error == job.error


@pytest.mark.django_db
def test_a_redelivered_job_keeps_the_captions_already_made_and_a_held_one_is_left_alone(alice):
    runs, test_images = captioners(alice, trainers=("captioner-lstm",))
    version = runs[0].model_version
    first = generate_captions(version, limit=1)  # what the killed worker had committed
    job = generation_job.job_create(runs=[runs[0].pk], eval_kind="quality", name="after a crash", user=alice)
    GenerationJob.objects.filter(pk=job.pk).update(status="running", heartbeat_at=timezone.now())
    assert generation_job.job_run(job.pk).status == "running"  # another worker holds it: not touched
    GenerationJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    job = generation_job.job_run(job.pk)
    assert job.status == "done" and job.done == job.total == len(test_images)
    captions = list(generated_captions(version))
    assert len(captions) == len(test_images) and first[0] in captions
    assert Task.objects.filter(campaign=job.campaign).count() == len(test_images)


@pytest.mark.django_db
def test_the_command_prints_progress_and_queues_on_request(alice, django_capture_on_commit_callbacks):
    runs, test_images = captioners(alice)
    out = StringIO()
    call_command("generate", "--runs", *[str(r.pk) for r in runs], "--evaluate", "relevance_fluency",
                 "--name", "from the terminal", "--beam-size", "2", stdout=out)
    lines = out.getvalue().splitlines()
    total = 2 * len(test_images)
    assert lines[0] == f"Generating captions for {total} image(s)."
    counts = [int(line.split("/")[0]) for line in lines if line.endswith(" images captioned.")]
    assert counts == sorted(counts) and counts[-1] == total and len(counts) >= 2
    campaign = Campaign.objects.get(name="from the terminal")
    assert lines[-1] == f"Generation job #{GenerationJob.objects.get().pk} done: campaign {campaign} (#{campaign.pk})."

    with django_capture_on_commit_callbacks(execute=False) as queued:
        call_command("generate", "--runs", str(runs[0].pk), "--split", "train", "--queue", stdout=out)
    assert len(queued) == 1 and out.getvalue().splitlines()[-1].startswith("Queued generation job #")
    with pytest.raises(CommandError, match="whole evaluation split"):
        call_command("generate", "--runs", str(runs[0].pk), "--evaluate", "quality", "--name", "x", "--limit", "2")
    with pytest.raises(CommandError, match="Give the campaign a name"):
        call_command("generate", "--runs", str(runs[0].pk), "--evaluate", "quality")


def test_a_real_worker_on_the_gpu_queue_runs_the_job(gpu_worker, django_user_model, client):
    import time

    from django.contrib.auth.models import Group

    alice = django_user_model.objects.create_user(username="alice", password="alice-pw-123")
    alice.groups.add(Group.objects.get_or_create(name="curator")[0])
    runs, test_images = captioners(alice, trainers=("captioner-lstm",))
    client.force_login(alice)
    created = client.post("/api/generation-jobs/", {"runs": [runs[0].pk], "eval_kind": "quality",
                                                    "name": "on the worker"}, content_type="application/json")
    assert created.status_code == 201, created.content
    deadline = time.monotonic() + 120
    while True:
        job = GenerationJob.objects.get(pk=created.json()["id"])
        if job.status in ("done", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert job.status == "done", job.error
    assert job.done == job.total == len(test_images) and job.campaign.name == "on the worker"


WEB_PROCESS = r"""
import json, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from celery.signals import before_task_publish
from django.contrib.auth.models import Group, User
from django.test import Client
from config.celery import app
from modeling.models import GenerationJob, Kind, ModelVersion, TrainingRun

app.conf.task_always_eager = False  # publish to the in-memory broker: a web process never runs the task
published = []
before_task_publish.connect(lambda sender=None, headers=None, routing_key=None, **kw:
                            published.append([sender, routing_key]), weak=False)
alice = User.objects.create_user("alice", password="alice-pw-123")
alice.groups.add(Group.objects.get_or_create(name="curator")[0])
runs = []
for n in (1, 2):
    run = TrainingRun.objects.create(kind=Kind.CAPTIONER, config={"trainer": "captioner-lstm"}, status="done")
    ModelVersion.objects.create(kind=Kind.CAPTIONER, version=n, run=run, artifact="x.pt", artifact_sha256="0" * 64,
                                config={"trainer": "captioner-lstm", "info": {}})
    runs.append(run.pk)
before = sorted(m for m in ("torch", "spacy") if m in sys.modules)
client = Client()
client.force_login(alice)
compare = client.get("/models/compare/", {"runs": runs})
posted = client.post("/models/compare/evaluate/", {"runs": runs, "eval_kind": "relevance_fluency", "name": "web"})
job = GenerationJob.objects.get()
page = client.get(posted["Location"])
api = client.post("/api/generation-jobs/", {"runs": runs[:1]}, content_type="application/json")
print(json.dumps({"before": before, "after": sorted(m for m in ("torch", "spacy") if m in sys.modules),
                  "codes": [compare.status_code, posted.status_code, page.status_code, api.status_code],
                  "location": posted["Location"], "job": [job.pk, job.status], "published": published}))
"""


def test_posting_the_form_queues_the_job_without_importing_torch_in_the_web_process(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", CAPTIONLAB_VAR_DIR=str(tmp_path / "var"),
               MEDIA_ROOT=str(tmp_path / "media"))
    proc = subprocess.run([sys.executable, "-c", WEB_PROCESS], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["before"] == [] and result["after"] == [], result
    assert result["codes"] == [200, 302, 200, 201]
    job_id, status = result["job"]
    assert result["location"] == f"/models/generation/{job_id}/" and status == "queued"
    assert result["published"] == [["modeling.generate_for_evaluation", "gpu"]] * 2
