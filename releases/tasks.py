"""Celery tasks of releases: thin wrappers that take an id and call one function.

All are safe to run twice (acks_late: a task whose worker died is delivered again): freezing
leaves a frozen release alone and restarts an interrupted one from no items; an export leaves a
done export alone and restarts anything else from scratch, deleting its partial files first; a
verification writes into a scratch folder and only records its comparison. An export deleted
before its task ran is left deleted.
"""
from celery import shared_task


@shared_task(name="curation.release_freeze", acks_late=True, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def release_freeze(release_id: int) -> str:
    from .services import run_freeze

    return run_freeze(release_id).status


@shared_task(name="curation.release_export", acks_late=True, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def release_export(export_id: int) -> str:
    from .publish import run_export

    export = run_export(export_id)
    return export.status if export else "deleted"


@shared_task(name="curation.release_export_verify", acks_late=True, time_limit=6 * 3600,
             soft_time_limit=6 * 3600 - 60)
def release_export_verify(export_id: int) -> str:
    from .verify import run_verify

    export = run_verify(export_id)
    return (export.verification or {}).get("status", "") if export else "deleted"
