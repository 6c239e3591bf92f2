"""Celery tasks of the modeling app (queue ``gpu`` through CELERY_TASK_ROUTES "modeling.*").

acks_late + reject_on_worker_lost: when a worker is killed mid-run the message goes back to the
queue, the next worker calls ``engine.train`` again and it resumes from the run's last checkpoint
(``generation_job.job_run`` likewise keeps the captions already generated).
"""
from celery import shared_task
from django.conf import settings


@shared_task(name="modeling.train", acks_late=True, reject_on_worker_lost=True,
             time_limit=settings.CELERY_TASK_TIME_LIMIT,
             soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT)
def train(run_id: int) -> str:
    from . import engine

    return engine.train(run_id).status


@shared_task(name="modeling.generate_for_evaluation", acks_late=True, reject_on_worker_lost=True,
             time_limit=settings.CELERY_TASK_TIME_LIMIT,
             soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT)
def generate_for_evaluation(job_id: int) -> str:
    """A GenerationJob: captions by captioner versions, then (with an evaluation kind) the campaign.
    Re-delivered after a lost worker, it keeps the captions made and does what is missing."""
    from . import generation_job
    from .threads import default_threads, torch_threads

    with torch_threads(default_threads()):
        return generation_job.job_run(job_id).status


@shared_task(name="modeling.loop_round", acks_late=True, reject_on_worker_lost=True,
             time_limit=settings.CELERY_TASK_TIME_LIMIT,
             soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT)
def loop_round(round_id: int) -> str:
    """One learning-loop round (modeling.loop.rounds); resumes when re-delivered."""
    from .loop.rounds import run_round

    return run_round(round_id).status


@shared_task(name="modeling.sweep_loops")
def sweep_loops() -> int:
    """Mark rounds whose worker stopped beating as failed (Celery beat, every minute)."""
    from .loop.services import sweep_stale

    return sweep_stale()


@shared_task(name="modeling.embed_collection", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=20,
             time_limit=settings.CELERY_TASK_TIME_LIMIT,
             soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT)
def embed_collection(self, job_id: int) -> str:
    """An EmbeddingJob (pack.embeddings.jobs): image and caption vectors, then the FAISS indexes. Re-delivered
    after a lost worker, it skips what is stored; while the lost worker's heartbeat is still fresh it waits for
    the heartbeat to go stale and tries again."""
    from pack.embeddings import jobs

    from .threads import default_threads, torch_threads

    with torch_threads(default_threads()):  # the worker's share of the cores (TORCH_THREADS)
        job = jobs.job_run(job_id)
    if job.status == job.Status.RUNNING:  # held by a worker whose heartbeat is fresh (or was, a moment ago)
        raise self.retry(countdown=jobs.STALE_AFTER.total_seconds() + 1)
    return job.status


@shared_task(name="modeling.cache_features", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=20,
             time_limit=settings.CELERY_TASK_TIME_LIMIT,
             soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT)
def cache_features(self, cache_id: int) -> str:
    """A FeatureCache (modeling.captioning.features): a frozen encoder's features of a release's images. Re-delivered
    after a lost worker, it keeps the shards written; while that worker's heartbeat is fresh it waits and retries."""
    from .captioning import features

    cache = features.cache_build(cache_id)
    if cache.status == cache.Status.RUNNING:
        raise self.retry(countdown=features.STALE_AFTER.total_seconds() + 1)
    return cache.status
