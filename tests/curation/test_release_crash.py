"""A worker killed in the middle of publishing an export never publishes half a file: while it is
dead only ``.partial`` names exist in storage and the export is not done; the redelivered task
(acks_late) deletes the leftovers, starts again and gives byte-identical files.

The worker is a separate process started from this file's WORKER script, which slows down each
copy to storage so the test can kill it between two files.
"""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection

from releases import formats, publish, services
from releases.models import ReleaseExport

from ..conftest import REQUIRE_SERVICES
from .helpers import wait_until
from .test_release_services import frozen_release, make_collection

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("REDIS_URL", "")

# The worker: the real tasks, with every copy to storage taking a second longer.
WORKER = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from releases import publish
original = publish.copy_to_storage
def slow_copy(storage, local, name):
    original(storage, local, name)
    time.sleep(float(os.environ.get("SLOW_COPY_SECONDS", "1")))
publish.copy_to_storage = slow_copy
from config.celery import app
app.worker_main(["worker", "-P", "solo", "-Q", sys.argv[1], "-l", "warning", "--without-gossip",
                 "--without-mingle", "--without-heartbeat", "-n", f"release-crash-{os.getpid()}@%h"])
"""


def _worker(queue: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, queue], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_export_publishes_nothing_and_the_rerun_gives_the_same_bytes():
    if not REDIS_URL or connection.vendor != "postgresql":
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but PostgreSQL/Redis are not configured")
        pytest.skip("needs PostgreSQL (DATABASE_URL) and Redis (REDIS_URL): workers are separate processes")
    from config.celery import app
    from releases.tasks import release_export

    release = frozen_release(make_collection("Crash photos", n_images=8))
    export = services.export_create(release, "webdataset", {"samples_per_shard": 1}, None, enqueue=False)
    # The expected bytes, written here by the same writer.
    with tempfile.TemporaryDirectory() as tmp:
        expected = {f["name"]: f["sha256"] for f in formats.write("webdataset", release, Path(tmp),
                                                                  dict(export.options))}
    assert len(expected) == 9  # 8 images, one sample each, one per shard, and the export manifest

    queue = f"release-crash-{uuid.uuid4().hex[:8]}"  # a queue of our own: no other worker takes the task
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        release_export.apply_async((export.pk,), queue=queue)
    finally:
        app.conf.task_always_eager = saved
    db = connection.settings_dict
    env = {**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
           "REDIS_URL": REDIS_URL, "CELERY_VISIBILITY_TIMEOUT": "3", "LOG_LEVEL": "WARNING",
           "MEDIA_ROOT": str(settings.MEDIA_ROOT), "SLOW_COPY_SECONDS": "1"}
    prefix = publish.export_prefix(export)
    media = Path(settings.MEDIA_ROOT) / prefix

    def partials() -> list[str]:
        return sorted(p.name for p in media.glob("*.partial")) if media.is_dir() else []

    first = _worker(queue, env)
    try:
        wait_until(lambda: len(partials()) >= 2, 90, "two partial files in storage")
        first.send_signal(signal.SIGKILL)  # no warm shutdown, no ack
        first.wait(10)
        # Dead mid-publication: partial files only, no final name, and the export is not done.
        names = sorted(p.name for p in media.iterdir())
        assert names and all(name.endswith(publish.PARTIAL) for name in names), names
        assert len(names) < len(expected)
        killed = ReleaseExport.objects.get(pk=export.pk)
        assert killed.status == ReleaseExport.Status.RUNNING and killed.files == [] and killed.attempts == 1
        time.sleep(4)  # past the visibility timeout: Redis gives the unacknowledged task back
        second = _worker(queue, {**env, "SLOW_COPY_SECONDS": "0"})
        try:
            wait_until(lambda: ReleaseExport.objects.get(pk=export.pk).status in ("done", "failed"), 120,
                  "the export to finish")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(20)
    finally:
        if first.poll() is None:
            first.kill()
    export.refresh_from_db()
    assert export.status == ReleaseExport.Status.DONE, export.error
    assert export.attempts == 2
    assert {f["name"]: f["sha256"] for f in export.files} == expected
    assert sorted(p.name for p in media.iterdir()) == sorted(expected)  # no partial left behind
    for name, sha in expected.items():
        with default_storage.open(prefix + name) as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == sha
