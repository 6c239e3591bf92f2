"""Annotation's long job, registered with the kernel's heartbeats (captionlab/heartbeat.py) from
``AnnotationConfig.ready()``: a campaign's aggregation pass (no status of its own: unfinished while
a task of it runs)."""
from captionlab import tasks
from captionlab.heartbeat import register_job_kind


def register_jobs() -> None:
    from .models import Campaign

    register_job_kind("aggregation", model=Campaign, tasks=("annotation.aggregate_campaign",),
                      retry=retry_aggregation, has_status=False)


def retry_aggregation(campaign) -> str:
    tasks.enqueue("annotation.aggregate_campaign", campaign.pk)
    return "the aggregation was queued again"
