from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    """Releases: freezing a selection of curated captions and their votes into a dataset, its exports and card.

    Above annotation (a release freezes votes) and below modeling (it trains on releases). The tables keep
    their curation_* names (the models moved here from curation with state-only migrations)."""

    name = "releases"

    def ready(self):
        from curation import extensions

        from . import jobs
        from .by_collection import collection_context

        extensions.register_collection_context(collection_context)  # the collection page's "Releases (n)" link
        jobs.register_jobs()  # the release and export job kinds (captionlab.heartbeat)
