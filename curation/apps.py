from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"

    def ready(self):
        from . import jobs

        jobs.register_jobs()
