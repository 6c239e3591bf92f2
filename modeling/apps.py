from django.apps import AppConfig


class ModelingConfig(AppConfig):
    name = "modeling"

    def ready(self):
        # Plug-ins into the floors below (issue 34): they never import modeling, modeling fills their registries.
        # Runs in every process Django sets up (web, Celery workers, manage.py), so before any run or job.
        from curation.pipeline import registry
        from pack.embeddings import jobs

        from .fluency_step import FluencyFilter

        if registry.FILTERS.get(FluencyFilter.name) is not FluencyFilter:
            registry.register(FluencyFilter)  # the fluency filter step (seed 004): curation's step registry
        jobs.register_runner(_send_embedding_job)  # embedding jobs run on the gpu queue's workers


def _send_embedding_job(job_id: int) -> None:
    from .tasks import embed_collection

    embed_collection.delay(job_id)
