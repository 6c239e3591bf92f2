"""A NUL or another control character in a query parameter or a form field is answered with a 400 and a
message, never a 500 (issue 25): the four places the security review found, and a form post."""
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tests.test_pipeline_pages import WORDS, make_collection, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.mark.parametrize("url, param", [("/api/captions/", "q"), ("/api/collections/", "name"),
                                        ("/api/images/", "sha256")])
def test_a_nul_in_an_api_filter_is_a_400_with_a_message(api, url, param):
    response = api.get(url, {param: "cat\x00dog"})
    assert response.status_code == 400
    assert "control character" in response.json()["detail"] and param in response.json()["detail"]
    assert api.get(url, {param: "cat dog"}).status_code == 200


def test_a_nul_in_the_step_page_reason_is_a_400_page(alice_client, alice):
    run = make_run(make_collection(), user=alice)
    url = reverse("run-step", args=[run.pk, WORDS])
    response = alice_client.get(url, {"reason": "a\x00b"})
    assert response.status_code == 400
    assert b"control character" in response.content and b"reason" in response.content
    assert alice_client.get(url, {"reason": "ab"}).status_code == 200


def test_other_control_characters_in_a_query_or_form_field_are_refused_but_tab_and_newlines_pass(alice_client):
    assert alice_client.get("/", {"q": "bell\x07"}).status_code == 400
    assert alice_client.get("/", {"q\x1b": "escape in the name"}).status_code == 400
    assert alice_client.get("/", {"q": "tab\tand\nnewline"}).status_code == 200
    response = alice_client.post(reverse("collection-create"), {"name": "x\x00y"})
    assert response.status_code == 400 and b"name" in response.content
