"""The annotator's submit-and-next is a fixed handful of statements: on PostgreSQL one for the
membership with its campaign, worker, assignment and the user's roles, two for the vote, two for
the next task and one for the panel's figures (the session comes from the cache), and the count
does not grow with the worker's votes or the campaign's size."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Vote

from .conftest import make_collection

pytestmark = pytest.mark.django_db


def _task_id(response) -> int:
    return int(re.search(r'name="task" value="(\d+)"', response.content.decode()).group(1))


def _statements(queries) -> list[str]:
    """The statements sent, less the savepoints of the test's own transaction (BEGIN and COMMIT
    in production, which the query log does not show)."""
    return [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the prepared statements of the hot path are PostgreSQL's")
def test_submit_and_next_is_a_fixed_number_of_statements(make_campaign, bob, bob_client):
    campaign = make_campaign("quality", members=[bob], collection=make_collection(name="thirty", n=30))
    submit = reverse("annotate-submit", args=[campaign.pk])
    task = _task_id(bob_client.get(reverse("annotate", args=[campaign.pk])))
    counts = []
    for n in range(12):
        with CaptureQueriesContext(connection) as ctx:
            response = bob_client.post(submit, {"task": task, "label": "good" if n % 2 else "bad", "seconds": "3"},
                                       HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        counts.append(len(_statements(ctx.captured_queries)))
        html = response.content.decode()
        assert f'data-role="done">{n + 1}<' in html  # the figures are right, not only cheap
        assert f'data-role="remaining">{30 - n - 1}<' in html
        task = _task_id(response)
    assert Vote.objects.filter(campaign=campaign).count() == 12
    # the user, the membership (+ roles), the task lock, the vote, the live reservation, the claim, the figures
    assert max(counts[2:]) <= 7, counts
    assert counts[-1] == counts[2], counts  # no growth with the worker's votes
