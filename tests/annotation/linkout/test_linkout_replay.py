"""A link-out participant's ids are bound to the browser session that started the study: a replay of
the same ids from another browser is refused while that session lives, and may resume once it is gone."""
from importlib import import_module

import pytest
from django.conf import settings
from django.test import Client

from annotation.models import Assignment

from .test_linkout import launch, start_url

pytestmark = pytest.mark.django_db


def test_the_same_participant_id_replayed_from_another_browser_is_refused(campaign, alice_client):
    campaign = launch(alice_client, campaign)
    first = Client()
    assert first.get(start_url(campaign, PROLIFIC_PID="pid4711", STUDY_ID="STUDY1", SESSION_ID="S1")).status_code == 302
    assignment = Assignment.objects.get(campaign=campaign)
    bound_to = assignment.session_key
    assert bound_to

    intruder = Client()
    refused = intruder.get(start_url(campaign, PROLIFIC_PID="pid4711", STUDY_ID="STUDY1", SESSION_ID="S1"))
    assert refused.status_code == 409
    assert "another browser" in refused.content.decode()
    assignment.refresh_from_db()
    assert assignment.session_key == bound_to  # nothing taken over
    # the first browser goes on as before
    assert first.get(start_url(campaign, PROLIFIC_PID="pid4711", STUDY_ID="STUDY1", SESSION_ID="S1")).status_code == 302

    # once the first browser's session is gone, the participant may resume elsewhere
    import_module(settings.SESSION_ENGINE).SessionStore(session_key=bound_to).delete()  # cache and database
    resumed = intruder.get(start_url(campaign, PROLIFIC_PID="pid4711", STUDY_ID="STUDY1", SESSION_ID="S1"))
    assert resumed.status_code == 302
    assignment.refresh_from_db()
    assert assignment.session_key != bound_to
    assert Assignment.objects.filter(campaign=campaign).count() == 1
