from django.apps import AppConfig


def _auto_round(sender, campaign_id, **kwargs):
    """annotation's aggregation_finished: a learning loop set to run every N votes starts its round."""
    from .loop.services import maybe_auto_round

    maybe_auto_round(campaign_id)


def _loop_card(campaign):
    """The "Learning loop" card of a campaign's dashboard (annotation.campaign_cards)."""
    from .views_loop import campaign_card

    return campaign_card(campaign)


class ModelingConfig(AppConfig):
    name = "modeling"

    def ready(self):
        # Plug-ins into the floors below (issue 34): they never import modeling, modeling fills their registries.
        # Runs in every process Django sets up (web, Celery workers, manage.py), so before any run or job.
        from annotation import campaign_cards
        from annotation.signals import aggregation_finished
        from curation.pipeline import registry
        from pack.embeddings import jobs
        from releases import model_provenance

        from .captioning.provenance import release_versions, version_entry
        from .fluency_step import FluencyFilter

        aggregation_finished.connect(_auto_round, dispatch_uid="modeling.loop.auto_round")
        campaign_cards.register(_loop_card)
        model_provenance.register_provider(find=release_versions, entry=version_entry)  # models a release names
        if registry.FILTERS.get(FluencyFilter.name) is not FluencyFilter:
            registry.register(FluencyFilter)  # the fluency filter step (seed 004): curation's step registry
        jobs.register_runner(_send_embedding_job)  # embedding jobs run on the gpu queue's workers


def _send_embedding_job(job_id: int) -> None:
    from .tasks import embed_collection

    embed_collection.delay(job_id)
