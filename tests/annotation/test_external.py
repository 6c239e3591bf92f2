"""External sessions: begin / current / quota / end, and a second identity refused."""
import pytest
from django.contrib.sessions.middleware import SessionMiddleware
from django.test import RequestFactory

from annotation import external
from annotation.models import Assignment, Membership, Task, Vote, Worker
from annotation.providers.base import ProviderError

pytestmark = pytest.mark.django_db


def make_request(session=None):
    request = RequestFactory().get("/")
    if session is None:
        SessionMiddleware(lambda r: None).process_request(request)
    else:
        request.session = session
    return request


def test_begin_creates_worker_membership_and_an_unconfirmed_assignment(make_campaign):
    campaign = make_campaign("fluency", backend="linkout")
    request = make_request()
    worker, assignment = external.begin(request, campaign, provider="linkout", external_worker_id="P" * 24,
                                        extra={"study_id": "S1"})
    assert worker.provider == "linkout" and worker.external_id == "P" * 24
    assert assignment.confirmed is False and assignment.session_key == request.session.session_key
    assert Membership.objects.get(campaign=campaign, worker=worker).assignment_id == assignment.pk
    assert external.current(request, campaign) == (worker, assignment)
    assert external.session_info(request, campaign)["extra"] == {"study_id": "S1"}
    # a reload: the same rows
    again = external.begin(request, campaign, provider="linkout", external_worker_id="P" * 24)
    assert again == (worker, assignment) and Assignment.objects.count() == 1

    other = make_request()  # another browser knows nothing of it
    assert external.current(other, campaign) is None


def test_mturk_assignments_are_per_assignment_id(make_campaign):
    campaign = make_campaign("fluency", backend="mturk")
    request = make_request()
    _, a1 = external.begin(request, campaign, provider="mturk", external_worker_id="W1", external_assignment_id="A1")
    _, a2 = external.begin(request, campaign, provider="mturk", external_worker_id="W1", external_assignment_id="A2")
    assert a1.pk != a2.pk and a2.provider_assignment_id == "A2"
    assert external.current(request, campaign)[1] == a2


def test_a_second_identity_from_the_same_browser_is_refused(make_campaign):
    campaign = make_campaign("fluency", backend="linkout")
    elsewhere = make_campaign("fluency", backend="linkout")
    request = make_request()
    external.begin(request, campaign, provider="linkout", external_worker_id="first")
    with pytest.raises(ProviderError) as err:
        external.begin(request, campaign, provider="linkout", external_worker_id="second")
    assert err.value.code == "second_identity"
    # still refused after the session forgot the campaign: the assignment keeps the browser's key
    external.end(request, campaign)
    assert external.current(request, campaign) is None
    with pytest.raises(ProviderError):
        external.begin(request, campaign, provider="linkout", external_worker_id="second")
    assert not Worker.objects.filter(external_id="second").exists()
    # another campaign is fine
    external.begin(request, elsewhere, provider="linkout", external_worker_id="second")


def test_blocked_and_junk_ids_are_refused(make_campaign):
    campaign = make_campaign("fluency", backend="linkout")
    Worker.objects.create(provider="linkout", external_id="spammer", blocked=True)
    with pytest.raises(ProviderError) as err:
        external.begin(make_request(), campaign, provider="linkout", external_worker_id="spammer")
    assert err.value.code == "blocked"
    with pytest.raises(ProviderError) as err:
        external.begin(make_request(), campaign, provider="linkout", external_worker_id="")
    assert err.value.code == "bad_worker_id"


def test_quota_counts_real_and_gold_votes_of_the_assignment(make_campaign):
    campaign = make_campaign("fluency", backend="linkout")
    request = make_request()
    worker, assignment = external.begin(request, campaign, provider="linkout", external_worker_id="P1")
    assert external.quota_left(campaign, assignment) is None
    campaign.provider_config = {"tasks_per_assignment": 3}
    campaign.save()
    assert external.quota_left(campaign, assignment) == 3
    tasks = list(campaign.tasks.all()[:4])
    tasks[0].role = Task.Role.TRAINING
    tasks[0].save()
    for task in tasks:
        Vote.objects.create(task=task, worker=worker, campaign=campaign, assignment=assignment, role=task.role,
                            value={"label": "fluent"})
    assert external.quota_left(campaign, assignment) == 0
