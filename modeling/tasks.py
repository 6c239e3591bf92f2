"""Celery tasks of the modeling app (queue ``gpu`` through CELERY_TASK_ROUTES "modeling.*").

acks_late + reject_on_worker_lost: when a worker is killed mid-run the message goes back to the
queue, the next worker calls ``engine.train`` again and it resumes from the run's last checkpoint.
"""
from celery import shared_task
from django.conf import settings


@shared_task(name="modeling.train", acks_late=True, reject_on_worker_lost=True,
             time_limit=getattr(settings, "CELERY_TASK_TIME_LIMIT", 6 * 3600),
             soft_time_limit=getattr(settings, "CELERY_TASK_SOFT_TIME_LIMIT", 6 * 3600 - 60))
def train(run_id: int) -> str:
    from . import engine

    return engine.train(run_id).status
