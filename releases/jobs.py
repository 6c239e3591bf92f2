"""Releases' long jobs, registered with the kernel's heartbeats (captionlab/heartbeat.py) from
``ReleasesConfig.ready()``: freezing a release and writing an export."""
from captionlab import tasks
from captionlab.heartbeat import register_job_kind


def register_jobs() -> None:
    from .models import Release, ReleaseExport

    register_job_kind("release", model=Release, tasks=("curation.release_freeze",), retry=retry_release)
    register_job_kind("export", model=ReleaseExport,
                      tasks=("curation.release_export", "curation.release_export_verify"), retry=retry_export)


def retry_release(release) -> str:
    tasks.enqueue("curation.release_freeze", release.pk)
    return "the release was queued again"


def retry_export(export) -> str:
    from .services import export_retry

    export_retry(export)
    return "the export was queued again"
