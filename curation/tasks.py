"""Celery tasks of the curation app: thin wrappers that take ids and call one function."""
from celery import shared_task

from .ingest import runner


@shared_task(name="curation.run_import", acks_late=True, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def run_import(job_id: int) -> str:
    job = runner.import_run(job_id)
    return job.status


@shared_task(name="curation.download_images", acks_late=True, time_limit=1800, soft_time_limit=1740)
def download_images(job_id: int, image_ids: list[int]) -> None:
    runner.download_chunk(job_id, image_ids)
