from django.apps import AppConfig


def _crowd_judgements(collection_ids, caption_ids):
    from .filter_vs_human import crowd_judgements  # numpy: loaded when a calibrated alignment step asks

    return crowd_judgements(collection_ids, caption_ids)


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self):
        from curation import extensions

        from . import jobs
        from .media_access import annotator_may_see

        extensions.register_media_policy(annotator_may_see)  # annotators see the images of their campaigns
        extensions.register_crowd_judgements(_crowd_judgements)  # the calibrated alignment filter's crowd labels
        jobs.register_jobs()  # the aggregation's job kind (captionlab.heartbeat)
