"""Curation's long jobs, registered with the kernel's heartbeats (captionlab/heartbeat.py) from
``CurationConfig.ready()``: imports and filter runs."""
from captionlab import tasks
from captionlab.heartbeat import register_job_kind


def register_jobs() -> None:
    from .models import FilterRun, ImportJob

    register_job_kind("import", model=ImportJob, tasks=("curation.run_import", "curation.download_images"),
                      retry=retry_import)
    register_job_kind("run", model=FilterRun, tasks=("curation.filter_start", "curation.filter_chunk",
                                                     "curation.filter_reconcile", "curation.filter_finish"),
                      retry=retry_run)


def retry_run(run) -> str:
    from .models import RunChunk

    if run.status == "finalising":  # the chunks were done; the run-level steps were not
        tasks.enqueue("curation.filter_finish", run.pk)
        return "the run-level steps were queued again"
    chunks = list(RunChunk.objects.filter(run=run).exclude(status__in=["done", "failed"])
                  .values_list("index", flat=True))
    if not RunChunk.objects.filter(run=run).exists():
        tasks.enqueue("curation.filter_start", run.pk)
        return "the run was started again"
    for index in chunks:
        tasks.enqueue("curation.filter_chunk", run.pk, index)
    if not chunks:  # every chunk finished: only the run-level steps were left
        tasks.enqueue("curation.filter_finish", run.pk)
    return f"{len(chunks)} unfinished chunk(s) queued again"


def retry_import(job) -> str:
    tasks.enqueue("curation.run_import", job.pk)
    return "the import was queued again (rows already imported are skipped as duplicates)"
