"""Queueing a task by its name, so that a service never imports a ``tasks`` module (the tasks import
the services they run; the services would import them back).

``enqueue("modeling.train", run.pk)`` is ``train.delay(run.pk)``: the task registered under that explicit
name is looked up on the Celery app and its ``delay`` called, so eager mode and the in-process pool
(``captionlab.inprocess.InProcessTask``) run it as they run any ``delay``. Celery's own ``send_task``
is not used: it always publishes to the broker, eager mode or not.
"""
from __future__ import annotations


def task(name: str):
    """The task registered as ``name``; the apps' ``tasks`` modules are imported first when it is not
    registered yet (a web process imports them only when it needs one)."""
    from celery import current_app

    tasks = current_app.tasks
    if name not in tasks:
        current_app.loader.import_default_modules()  # autodiscover: every installed app's tasks module
    return tasks[name]


def enqueue(name: str, *args, **kwargs):
    """Queue the task registered as ``name`` with these arguments (``task.delay``); its AsyncResult."""
    return task(name).delay(*args, **kwargs)
