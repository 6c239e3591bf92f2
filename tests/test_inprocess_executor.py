"""The embedded default (no broker): "Start run" returns at once and the job runs in the web
process's thread pool, so the run page's bar moves to 100% (captionlab/inprocess.py)."""
import threading
import time

import pytest
from django.urls import reverse

from captionlab import inprocess
from curation.models import Caption, Collection, FilterRun, Image, Pipeline
from curation.pipeline import registry
from curation.pipeline.base import Filter, keep

GATE = threading.Event()
SEEN_THREADS: list[str] = []


class WaitsForTheGate(Filter):
    """Holds the run until the test opens the gate: the request must not be the one waiting."""

    name, label = "test_inproc_gate", "Waits for the gate"
    description = "Keeps everything once the gate opens."
    defaults = {}

    def apply(self, items):
        SEEN_THREADS.append(threading.current_thread().name)
        assert GATE.wait(30), "the test never opened the gate"
        return [keep("ok") for _ in items]


registry.FILTERS.setdefault(WaitsForTheGate.name, WaitsForTheGate)


@pytest.fixture
def background_pool(eager_celery, settings):
    """What config/wsgi.py switches on in the embedded default: eager tasks go to the pool."""
    settings.CELERY_INPROCESS_WORKERS = 2
    GATE.clear()
    SEEN_THREADS.clear()
    inprocess.enable()
    yield
    GATE.set()
    assert inprocess.wait_idle(60), "background jobs still running at teardown"
    inprocess.disable()


def _collection() -> Collection:
    collection = Collection.objects.create(name="embedded default")
    for i, text in enumerate(["a red bus on a wet street", "two dogs asleep on a porch", "a lighthouse at dusk"]):
        image = Image.objects.create(collection=collection, external_id=f"e{i}", width=320, height=200,
                                     format="JPEG", sha256=f"{i:064d}", status="ready")
        Caption.objects.create(image=image, text=text, origin="alt_text")
    return collection


@pytest.mark.django_db(transaction=True)
def test_start_run_returns_at_once_and_the_run_page_bar_reaches_100(alice_client, background_pool):
    collection = _collection()
    pipeline = Pipeline.objects.create(name="gate", steps=[{"filter": WaitsForTheGate.name}])

    response = alice_client.post(reverse("pipeline-run", args=[pipeline.pk]), {"collection": collection.pk})
    run = FilterRun.objects.get(pipeline=pipeline)
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    run.refresh_from_db()
    # the gate is still shut: a run inside the request would have held it (and failed at the gate's timeout)
    assert run.status != "done", "the run finished inside the request: the browser would have waited for it"
    assert threading.current_thread().name not in SEEN_THREADS, "the request ran the filter itself"

    page = alice_client.get(run.get_absolute_url())
    assert page.status_code == 200 and "progress" in page.content.decode().lower()

    GATE.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status == "done":
            break
        time.sleep(0.1)
    assert run.status == "done", f"the run is still {run.status}"
    assert run.percent == 100
    assert SEEN_THREADS and all(name.startswith("captionlab-job") for name in SEEN_THREADS)
    fragment = alice_client.get(reverse("run-progress", args=[run.pk]))
    assert fragment.status_code == 200 and "100" in fragment.content.decode()


def test_management_commands_keep_running_tasks_inline(settings):
    """Only the web process hands tasks to the pool (a command may remove its input afterwards)."""
    settings.CELERY_INPROCESS_WORKERS = 2
    inprocess.disable()
    assert inprocess.workers() == 0
    inprocess.enable()
    try:
        assert inprocess.workers() == 2
    finally:
        inprocess.disable()
