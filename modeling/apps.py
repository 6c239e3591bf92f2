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
        from annotation import campaign_cards
        from annotation.signals import aggregation_finished
        from releases import model_provenance

        from .captioning.provenance import release_versions, version_entry

        aggregation_finished.connect(_auto_round, dispatch_uid="modeling.loop.auto_round")
        campaign_cards.register(_loop_card)
        model_provenance.register_provider(find=release_versions, entry=version_entry)  # models a release names
