"""A Celery worker process for tests, with a deliberately slow test filter registered.

    python -m tests.curation.slow_worker <queue>

The worker is a separate process so a test can kill it with SIGKILL in the middle of a chunk. With
SLOW_BLOCK_AFTER=N in its environment the filter's calls after the N-th never return: the chunk stays
in progress until the test kills the worker, however slowly the machine runs.
"""
import itertools
import os
import sys
import threading
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from curation.pipeline import registry  # noqa: E402
from curation.pipeline.base import Filter, drop, keep  # noqa: E402


class SlowLength(Filter):
    """Keeps captions of at least ``min_words`` words, taking ``seconds`` per chunk."""

    name, defaults = "test_slow_length", {"min_words": 3, "seconds": 1.0}

    calls = itertools.count(1)

    def apply(self, items):
        block_after = os.environ.get("SLOW_BLOCK_AFTER")
        if block_after is not None and next(self.calls) > int(block_after):
            threading.Event().wait()  # until the test kills this process
        time.sleep(self.params["seconds"])
        return [keep(score=len(it.text.split())) if len(it.text.split()) >= self.params["min_words"]
                else drop("too_short", len(it.text.split())) for it in items]


registry.FILTERS.setdefault(SlowLength.name, SlowLength)

if __name__ == "__main__":
    from config.celery import app

    queue = sys.argv[1] if len(sys.argv) > 1 else "filters"
    app.worker_main(["worker", "-P", "solo", "-Q", queue, "-l", "warning", "--without-gossip",
                     "--without-mingle", "--without-heartbeat", "-n", f"slow-{os.getpid()}@%h"])
