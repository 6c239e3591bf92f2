"""The Celery application. Workers: ``celery -A config worker -Q default,filters``."""
import os

from celery import Celery
from celery.signals import celeryd_init, task_postrun, task_prerun, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Tasks use captionlab.inprocess.InProcessTask: without a broker, the web process runs them in a
# small thread pool instead of inside the request (captionlab/inprocess.py).
app = Celery("captionlab", task_cls="captionlab.inprocess:InProcessTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _threads(name):
    """A handler of modeling.threads, imported when the signal fires (Django is set up by then)."""
    def handler(**kwargs):
        from modeling import threads

        getattr(threads, name)(**kwargs)
    return handler


# Each worker process gets its share of the cores for torch (modeling/threads.py, TORCH_THREADS).
celeryd_init.connect(_threads("remember_concurrency"), weak=False)
worker_process_init.connect(_threads("apply_in_worker_process"), weak=False)


def _heartbeat(name):
    def handler(**kwargs):
        from captionlab import heartbeat

        getattr(heartbeat, name)(**kwargs)
    return handler


# Long jobs without a heartbeat of their own (imports, filter runs, releases, exports, aggregation)
# beat while a worker runs one of their tasks (captionlab/heartbeat.py): pages tell a dead worker.
task_prerun.connect(_heartbeat("on_task_prerun"), weak=False)
task_postrun.connect(_heartbeat("on_task_postrun"), weak=False)
