"""Celery tasks of releases: thin wrappers that take an id and call one function.

Both are safe to run twice (acks_late: a task whose worker died is delivered again): freezing
leaves a frozen release alone and restarts an interrupted one from no items; an export leaves a
done export alone and restarts anything else from scratch, deleting its partial files first.
"""
from celery import shared_task


@shared_task(name="curation.release_freeze", acks_late=True, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def release_freeze(release_id: int) -> str:
    from .services import run_freeze

    return run_freeze(release_id).status


@shared_task(name="curation.release_export", acks_late=True, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def release_export(export_id: int) -> str:
    from .publish import run_export

    return run_export(export_id).status
