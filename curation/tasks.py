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


@shared_task(name="curation.filter_start", acks_late=True, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def filter_start(run_id: int) -> None:
    from .pipeline import executor

    executor.start(run_id, enqueue=lambda run, index: filter_chunk.delay(run, index))


@shared_task(name="curation.filter_chunk", bind=True, acks_late=True, max_retries=2,
             time_limit=1800, soft_time_limit=1740)
def filter_chunk(self, run_id: int, index: int) -> str:
    """One chunk of a filter run. Retried twice on error; then marked failed so the run completes."""
    from .pipeline import executor

    try:
        return executor.run_chunk(run_id, index)
    except Exception as exc:  # noqa: BLE001
        if self.request.retries < self.max_retries and not self.app.conf.task_always_eager:
            raise self.retry(exc=exc, countdown=2 ** self.request.retries)
        executor.chunk_failed(run_id, index, f"{type(exc).__name__}: {exc}")
        return "failed"


@shared_task(name="curation.filter_finish", acks_late=True, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def filter_finish(run_id: int) -> None:
    """The run-level steps and the funnel of a run whose chunks are done (a retry after a lost worker)."""
    from .pipeline import executor

    executor.finish(run_id)


@shared_task(name="curation.filter_reconcile", acks_late=True, time_limit=1800, soft_time_limit=1740)
def filter_reconcile(run_id: int, image_ids: list[int]) -> int:
    """The steps after curators' overrides in a finished run follow the final outcomes (``executor.reconcile``)."""
    from .pipeline import executor

    return executor.reconcile(run_id, image_ids)

