"""A loop set to run every N votes starts its round from the campaign's aggregation, once N new votes are
in, and not before."""
from annotation.tasks import aggregate_campaign
from modeling.loop import services
from modeling.models import LoopRound
from tests.modeling.loop_helpers import make_pool_campaign, next_tasks, vote


def test_a_round_starts_by_itself_after_every_n_new_votes(db, alice, django_user_model,
                                                          django_capture_on_commit_callbacks):
    campaign, truth, raters = make_pool_campaign(alice, django_user_model, n=100, seed=31, name="auto fluency")
    loop = services.loop_create(campaign=campaign, auto_every_votes=60)
    vote(campaign, truth, next_tasks(campaign, 20), raters)  # 40 votes
    with django_capture_on_commit_callbacks(execute=False) as queued:
        aggregate_campaign(campaign.pk)
    assert not LoopRound.objects.exists() and not queued
    vote(campaign, truth, next_tasks(campaign, 10), raters)  # 60 votes in all
    with django_capture_on_commit_callbacks(execute=False) as queued:
        aggregate_campaign(campaign.pk)
    round_ = LoopRound.objects.get()
    assert round_.trigger == "auto" and round_.status == "queued" and len(queued) == 1
    loop.refresh_from_db()
    assert loop.votes_at_last_round == 60
    # While that round is open, more votes do not queue a second one.
    vote(campaign, truth, next_tasks(campaign, 40), raters)
    aggregate_campaign(campaign.pk)
    assert LoopRound.objects.count() == 1
