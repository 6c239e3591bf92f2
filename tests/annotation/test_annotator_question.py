"""What the annotator reads (issue 23): each kind asks its own question, never the curator's description
of how results are reported; a curator may word the question for a campaign (form and API); Undo is
offered only when there is an answer to undo."""
import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.kinds import KINDS
from annotation.models import Campaign

from .test_campaign_pages import form_data

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("annotation.tasks.schedule_aggregation", lambda campaign_id: None)


def shown_task_id(response) -> int:
    return int(re.search(r'name="task" value="(\d+)"', response.content.decode()).group(1))


def test_every_kind_has_a_question_of_its_own():
    for kind in KINDS.values():
        assert kind.question, kind.name
        assert "seed" not in kind.question.lower() and "reported" not in kind.question.lower(), kind.name


def test_the_work_page_asks_the_kinds_question_not_the_curators_description(make_campaign, bob, bob_client):
    campaign = make_campaign("quality", members=[bob])
    html = bob_client.get(reverse("annotate", args=[campaign.pk])).content.decode()
    assert "Is this a good caption for the image?" in html
    assert "Reported as the share" not in html and "seed 002" not in html


def test_a_curator_words_the_question_in_the_create_form_and_annotators_read_it(alice_client, collection, bob):
    question = "Would you keep this caption in a museum catalogue?"
    response = alice_client.post(reverse("campaign-create"),
                                 form_data(collection, kind="quality", members=[bob.pk], start="on",
                                           instructions="", annotator_question=question))
    assert response.status_code == 302, response.content.decode()[:2000]
    campaign = Campaign.objects.get(name="Fluency of alt-texts")
    assert campaign.annotator_question == question and campaign.question == question
    alice_client.force_login(bob)
    html = alice_client.get(reverse("annotate", args=[campaign.pk])).content.decode()
    assert re.search(r'data-role="question">' + re.escape(question) + "<", html)
    assert question in re.search(r'id="instructions".*?</details>', html, re.S).group(0)  # no instructions given


def test_a_too_long_question_is_refused_with_a_message(alice_client, collection):
    response = alice_client.post(reverse("campaign-create"),
                                 form_data(collection, annotator_question="Why? " * 100))
    assert response.status_code == 400 and not Campaign.objects.exists()
    assert "at most 300 characters" in response.content.decode()


def test_the_api_sets_and_changes_the_question(alice, collection, make_campaign, bob):
    api = APIClient()
    api.force_authenticate(alice)
    body = {"name": "Quality via API", "kind": "quality", "collection": collection.pk,
            "annotator_question": "Is this caption right for the photo?"}
    created = api.post(reverse("api-campaign-list"), body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["annotator_question"] == "Is this caption right for the photo?"
    url = reverse("api-campaign-detail", args=[created.json()["id"]])
    changed = api.patch(url, {"annotator_question": ""}, format="json")
    assert changed.status_code == 200 and changed.json()["annotator_question"] == ""
    assert Campaign.objects.get(pk=created.json()["id"]).question == KINDS["quality"].question
    too_long = api.patch(url, {"annotator_question": "x" * 301}, format="json")
    assert too_long.status_code == 400 and "annotator_question" in too_long.json()


def test_undo_is_offered_only_once_there_is_an_answer_to_undo(make_campaign, bob, bob_client):
    campaign = make_campaign("quality", members=[bob])
    page = bob_client.get(reverse("annotate", args=[campaign.pk]))
    assert 'data-role="undo-form"' not in page.content.decode()
    after = bob_client.post(reverse("annotate-submit", args=[campaign.pk]),
                            {"task": shown_task_id(page), "label": "good"}, **HX)
    assert after.status_code == 200 and 'data-role="undo-form"' in after.content.decode()
    Campaign.objects.filter(pk=campaign.pk).update(edit_window_seconds=0)  # the window has closed
    later = bob_client.get(reverse("annotate", args=[campaign.pk]))
    assert 'data-role="undo-form"' not in later.content.decode()
