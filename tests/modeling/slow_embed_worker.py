"""A Celery worker process for the embedding crash test: images are encoded two at a time, slowly, and a job's
heartbeat goes stale after 3 s, so a test can SIGKILL the worker mid-job and watch a second one resume.

    python -m tests.modeling.slow_embed_worker <queue>

With EMBED_BLOCK_AFTER=N in its environment the batches after the N-th never end: the job stays in
progress until the test kills the worker, however slowly the machine runs.
"""
import itertools
import os
import sys
import threading
import time
from datetime import timedelta

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from pack.embeddings import jobs  # noqa: E402
from pack.loading import Encoder  # noqa: E402

settings.EMBED_BATCH_SIZE = 2
jobs.STALE_AFTER = timedelta(seconds=3)
_encode = Encoder.encode_pixels


_batches = itertools.count(1)


def slow_encode(self, pixel_values):
    block_after = os.environ.get("EMBED_BLOCK_AFTER")
    if block_after is not None and next(_batches) > int(block_after):
        threading.Event().wait()  # until the test kills this process
    time.sleep(float(os.environ.get("SLOW_EMBED_SECONDS", "0.4")))
    return _encode(self, pixel_values)


Encoder.encode_pixels = slow_encode

if __name__ == "__main__":
    from config.celery import app

    queue = sys.argv[1]
    app.worker_main(["worker", "-P", "solo", "-Q", queue, "-l", "warning", "--without-gossip",
                     "--without-mingle", "--without-heartbeat", "-n", f"embed-{os.getpid()}@%h"])
