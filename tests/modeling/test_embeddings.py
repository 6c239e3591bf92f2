"""Embeddings as data: a collection's real photos and captions embedded by a registered model through the job
(stored once per item and model, undecodable files reported, nothing recomputed on a second run), with every
outside socket blocked; and a worker killed mid-job resumes without duplicates."""
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

import pack
from pack.embeddings import image_vectors, jobs, text_vectors
from pack.embeddings.index import index_search, index_status
from pack.models import EmbeddingJob, ImageEmbedding, TextEmbedding

from ..conftest import REQUIRE_SERVICES
from .pack_helpers import photo_collection

ROOT = Path(__file__).resolve().parents[2]


def test_a_collection_of_real_photos_is_embedded_once_and_a_broken_file_is_reported(
        tiny_clip, shared_photos, no_outside_network):
    collection = photo_collection(shared_photos, broken=1)
    job = jobs.job_create(collection=collection, model="tiny-clip")
    lines = []
    job = jobs.job_run(job.pk, echo=lines.append)
    photos = len(list(shared_photos.glob("*.jpg")))
    assert job.status == "done", job.error
    assert job.summary["images"] == photos + 1 and job.summary["undecodable"] == 1 and job.failed == 1
    rows = ImageEmbedding.objects.filter(model=tiny_clip, collection=collection)
    assert rows.filter(error="").count() == photos
    broken = rows.exclude(error="").get()
    assert "cannot decode" in broken.error
    vector = np.frombuffer(bytes(rows.filter(error="").first().vector), dtype="<f4")
    assert vector.shape == (16,) and abs(np.linalg.norm(vector) - 1) < 1e-4
    assert TextEmbedding.objects.filter(encoder=tiny_clip.key).count() == photos + 1
    assert any("embedded" in line for line in lines) and lines[-1].startswith("Done in")
    assert job.summary["indexes"]["image"]["count"] == photos
    status = index_status(collection, tiny_clip)
    assert status["image"]["current"] and status["caption"]["stored"] == photos + 1


def test_a_second_run_reads_the_stored_vectors_and_encodes_nothing(tiny_clip, shared_photos, monkeypatch):
    collection = photo_collection(shared_photos, limit=6)
    assert jobs.job_run(jobs.job_create(collection=collection, model="tiny-clip").pk).status == "done"
    from pack.loading import Encoder

    calls = []
    monkeypatch.setattr(Encoder, "encode_pixels", lambda self, px: calls.append(px) or np.zeros((len(px), 16)))
    monkeypatch.setattr(Encoder, "encode_texts", lambda self, t, batch_size=0: calls.append(t) or np.zeros((len(t), 16)))
    again = jobs.job_run(jobs.job_create(collection=collection, model="tiny-clip").pk)
    assert again.status == "done" and calls == []
    assert ImageEmbedding.objects.filter(model=tiny_clip).count() == 6


def test_the_same_photo_gets_the_same_vector_whichever_batch_it_is_in(tiny_clip, shared_photos):
    collection = photo_collection(shared_photos, limit=5)
    ids = list(collection.images.order_by("pk").values_list("pk", flat=True))
    together, _ = image_vectors(tiny_clip, ids, batch_size=5)
    ImageEmbedding.objects.all().delete()
    alone, _ = image_vectors(tiny_clip, ids[2:3], batch_size=1)
    assert np.allclose(together[ids[2]], alone[ids[2]], atol=1e-5)


def test_identical_caption_texts_are_encoded_once(tiny_clip):
    vectors = text_vectors(tiny_clip, ["a dog runs on the beach", "a cat sleeps", "a dog runs on the beach"])
    assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])
    assert TextEmbedding.objects.filter(encoder=tiny_clip.key).count() == 2


def test_searching_a_collection_before_embedding_says_what_to_do(tiny_clip, shared_photos):
    collection = photo_collection(shared_photos, limit=2)
    with pytest.raises(pack.PackError, match="Embed on the collection page") as caught:
        index_search(collection=collection, model=tiny_clip, target="image", queries=np.ones(16), k=3)
    assert caught.value.code == "no_embeddings"


def test_the_index_finds_each_photo_itself_first_and_stays_right_after_new_images(tiny_clip, shared_photos):
    collection = photo_collection(shared_photos, limit=8)
    jobs.job_run(jobs.job_create(collection=collection, model="tiny-clip").pk)
    stored, _ = image_vectors(tiny_clip, list(collection.images.values_list("pk", flat=True)), compute=False)
    for image_id, vector in stored.items():
        assert index_search(collection=collection, model=tiny_clip, target="image", queries=vector, k=1)[0][0][0] == image_id
    other = photo_collection(shared_photos, name="more", limit=10)  # the same photos in another collection
    jobs.job_run(jobs.job_create(collection=other, model="tiny-clip").pk)
    found = index_search(collection=collection, model=tiny_clip, target="image", queries=next(iter(stored.values())),
                         k=20)[0]
    assert len(found) == 8 and {image_id for image_id, _ in found} == set(stored)


def test_the_embed_command_prints_progress_and_the_summary(tiny_clip, shared_photos, capsys):
    collection = photo_collection(shared_photos, limit=4)
    call_command("embed", str(collection.pk), "--model", "tiny-clip")
    out = capsys.readouterr().out
    assert "images..." in out and "8/8 embedded" in out
    assert "Done in" in out and EmbeddingJob.objects.get().status == "done"


def test_the_embed_command_without_a_model_says_how_to_register_one(db, models_dir):
    from django.core.management.base import CommandError

    from curation.models import Collection

    collection = Collection.objects.create(name="empty")
    with pytest.raises(CommandError, match="models add-pretrained"):
        call_command("embed", str(collection.pk))


def _worker(queue: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.modeling.slow_embed_worker", queue], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_while_embedding_resumes_without_duplicates(models_dir, _tiny_clip_source, shared_photos):
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url or connection.vendor != "postgresql":
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but PostgreSQL/Redis are not configured")
        pytest.skip("needs PostgreSQL (DATABASE_URL) and Redis (REDIS_URL): workers are separate processes")
    import shutil

    from config.celery import app
    from modeling.tasks import embed_collection

    shutil.copytree(_tiny_clip_source, models_dir / "tiny-clip")
    model = pack.model_add_pretrained(directory=str(models_dir / "tiny-clip"), name="tiny-clip", licence="MIT")
    collection = photo_collection(shared_photos)
    photos = collection.images.count()
    job = jobs.job_create(collection=collection, model=model)
    queue = f"embed-crash-{uuid.uuid4().hex[:8]}"
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        embed_collection.apply_async((job.pk,), queue=queue)
    finally:
        app.conf.task_always_eager = saved
    db = connection.settings_dict
    from django.conf import settings

    env = {**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
           "REDIS_URL": redis_url, "CELERY_VISIBILITY_TIMEOUT": "3", "LOG_LEVEL": "WARNING",
           "CAPTIONLAB_MODELS_DIR": str(models_dir), "MEDIA_ROOT": str(settings.MEDIA_ROOT)}
    first = _worker(queue, {**env, "EMBED_BLOCK_AFTER": "2"})  # 4 images, then its third batch never ends
    try:
        _wait(lambda: ImageEmbedding.objects.filter(model=model).count() >= 4, 90, "some images embedded")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        done_before = ImageEmbedding.objects.filter(model=model).count()
        assert done_before < photos and EmbeddingJob.objects.get(pk=job.pk).status == "running"
        time.sleep(4)  # past the visibility timeout and the 3 s heartbeat
        second = _worker(queue, {**env, "SLOW_EMBED_SECONDS": "0"})
        try:
            _wait(lambda: EmbeddingJob.objects.get(pk=job.pk).status in ("done", "failed"), 120, "the job to end")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(20)
    finally:
        if first.poll() is None:
            first.kill()
    job.refresh_from_db()
    assert job.status == "done", job.error
    rows = list(ImageEmbedding.objects.filter(model=model).values_list("image_id", flat=True))
    assert len(rows) == len(set(rows)) == photos
    assert job.done == job.total == photos * 2


def test_a_stale_running_job_is_claimed_again_and_a_fresh_one_is_not(tiny_clip, shared_photos):
    collection = photo_collection(shared_photos, limit=2)
    job = jobs.job_create(collection=collection, model=tiny_clip)
    EmbeddingJob.objects.filter(pk=job.pk).update(status="running", heartbeat_at=timezone.now())
    assert jobs.job_run(job.pk).status == "running"  # another worker holds it
    EmbeddingJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert jobs.job_run(job.pk).status == "done"
