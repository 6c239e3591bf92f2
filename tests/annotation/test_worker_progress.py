"""The work panel's "left for you" figure: exact for small campaigns; for large ones the campaign's
open count comes from the cache for a few seconds, so a panel never scans the whole campaign."""
import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation import services
from annotation.routing import next_task, submit_vote, worker_for_user

pytestmark = pytest.mark.django_db


def test_remaining_counts_open_items_the_worker_has_not_voted_on(make_campaign, bob):
    campaign = make_campaign("fluency", members=[bob], votes_per_item=2)
    worker = worker_for_user(bob)
    total = campaign.tasks.filter(role="real").count()
    assert services.worker_progress(campaign, worker) == {"done": 0, "remaining": total}
    for _ in range(3):
        served = next_task(campaign, worker)
        submit_vote(campaign, worker, served.task.pk, {"label": "fluent"}, seconds=1.0)
    assert services.worker_progress(campaign, worker) == {"done": 3, "remaining": total - 3}


def test_a_large_campaigns_open_count_is_cached_briefly(make_campaign, bob, monkeypatch):
    campaign = make_campaign("fluency", members=[bob])
    worker = worker_for_user(bob)
    monkeypatch.setattr(services, "OPEN_COUNT_CACHED_ABOVE", 1)  # this one counts as large
    cache.delete(f"annotation:open-real:{campaign.pk}")
    first = services.worker_progress(campaign, worker)
    with CaptureQueriesContext(connection) as queries:
        assert services.worker_progress(campaign, worker) == first
    assert not any('"status" = ' in q["sql"] and "COUNT(*)" in q["sql"] and '"annotation_vote"' not in q["sql"]
                   for q in queries.captured_queries), "the campaign's open tasks were counted again"
    cache.delete(f"annotation:open-real:{campaign.pk}")
