"""Bob's written captions are checked on the server for markup, gibberish and language, and each
refusal tells him what to fix; real captions with names, rare words and foreign place names pass.
The texts are graded by hand: every one below is in the list it belongs to."""
import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.kinds import WRITE, VoteInvalid
from annotation.models import Vote
from annotation.text_checks import check_caption, detected_language

from .conftest import make_collection

ENGLISH = [
    "A brown dog runs along the beach at sunset.",
    "Harrison Ford attends the premiere of the film in Los Angeles.",
    "two kids playing soccer in a muddy field",
    "The Eiffel Tower lit up at night in Paris.",
    "A kayaker paddles through whitewater rapids.",
    "Three cyclists in neon jerseys ride past a vineyard.",
    "A barista pours latte art into a ceramic cup.",
    "Two dachshunds nap on a plaid blanket.",
    "A woman in a sari walks through a bazaar in Jaipur.",
    "An old man feeds pigeons on the Piazza San Marco.",
    "A chef slices sushi at the counter of a restaurant in Tokyo.",
    "the rusty tractor against the golden wheat field",
    "a dog < a cat and 3 > 2 fish on the table",  # angle brackets, but no tag
]
GERMAN = [
    "Ein brauner Hund läuft bei Sonnenuntergang am Strand entlang.",
    "Zwei Kinder spielen Fußball auf einer matschigen Wiese.",
    "Eine Frau mit rotem Regenschirm geht durch den Regen.",
]
FRENCH = [
    "Un chien court sur la plage au coucher du soleil.",
    "Une femme traverse la rue sous la pluie.",
]
SPANISH = ["Dos niños juegan en la playa con una pelota."]
GIBBERISH = [
    "asdf asdf asdf asdf asdf",
    "asdf qwer zxcv uiop hjkl",
    "qwxz kjhg plmn vbcx trew",
    "lol lol lol lol",
    "dog dog dog on the beach",
    "cat dog cat dog cat dog",
]
MARKUP = {
    "A dog <b>runs</b> on the beach.": "HTML tags",
    'A cat <script>alert("x")</script> on a sofa.': "HTML tags",
    "A dog on the [beach](http://evil.example/x)": "Markdown",
    "A cat on a sofa ![photo](cat.png) at home": "Markdown",
    "A cat sleeping, more at https://example.com/cats": "web addresses",
    "See www.example.com for this dog on a beach": "web addresses",
    "A dog <!-- hidden --> on a beach": "HTML tags",
}


@pytest.mark.parametrize("text", ENGLISH)
def test_english_captions_pass_in_an_english_campaign(text):
    assert check_caption(text, "en") is None


@pytest.mark.parametrize("text,language", [(t, "German") for t in GERMAN] + [(t, "French") for t in FRENCH]
                         + [(t, "Spanish") for t in SPANISH])
def test_captions_in_another_language_are_refused_with_its_name(text, language):
    assert check_caption(text, "en") == (f"This caption looks like {language}; this campaign asks for "
                                         f"captions in English.")


@pytest.mark.parametrize("text", GERMAN)
def test_a_german_campaign_takes_german_and_refuses_english(text):
    assert check_caption(text, "de") is None
    assert detected_language("A brown dog runs along the beach at sunset.", "de") == "en"


@pytest.mark.parametrize("text", GIBBERISH)
def test_gibberish_is_refused(text):
    message = check_caption(text, "en")
    assert message is not None and ("repeats" in message or "not words we know" in message)


@pytest.mark.parametrize("text,words", MARKUP.items())
def test_markup_and_links_are_refused(text, words):
    assert words in check_caption(text, "en")


def test_a_language_the_tools_do_not_know_is_not_judged():
    assert detected_language("Ein Hund läuft am Strand entlang.", "xx") is None
    assert check_caption("Ein Hund läuft am Strand entlang.", "xx") is None


@pytest.mark.django_db
def test_the_write_kind_raises_the_message_and_an_import_can_skip_the_checks(make_campaign):
    campaign = make_campaign("write")
    task = campaign.tasks.first()
    task.campaign = campaign
    with pytest.raises(VoteInvalid, match="looks like German"):
        WRITE.validate({"text": GERMAN[0]}, task)
    assert WRITE.validate({"text": GERMAN[0]}, task, text_checks=False) == {"text": GERMAN[0]}
    assert WRITE.validate({"text": "  A brown dog   runs on the beach. "}, task) == {
        "text": "A brown dog runs on the beach."}


@pytest.mark.django_db
def test_bob_gets_the_message_on_the_page_and_over_the_api_and_nothing_is_stored(make_campaign, bob, bob_client):
    campaign = make_campaign("write", members=[bob], collection=make_collection(name="write checks", n=2))
    page = bob_client.get(reverse("annotate", args=[campaign.pk]))
    task_id = int(re.search(r'name="task" value="(\d+)"', page.content.decode()).group(1))
    for text, message in ((GERMAN[1], "looks like German"), (GIBBERISH[0], "repeats “asdf”"),
                          ("A dog <b>runs</b> on the beach.", "HTML tags")):
        response = bob_client.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task_id, "text": text})
        html = response.content.decode()
        assert response.status_code == 400 and message in html
        assert text.replace("<", "&lt;").replace(">", "&gt;") in html  # the typed text stays in the form
    api = APIClient()
    api.force_authenticate(bob)
    response = api.post(f"/api/campaigns/{campaign.pk}/tasks/{task_id}/vote/", {"value": {"text": FRENCH[0]}},
                        format="json")
    assert response.status_code == 400 and "looks like French" in response.json()["detail"]
    assert not Vote.objects.filter(campaign=campaign).exists()
    ok = api.post(f"/api/campaigns/{campaign.pk}/tasks/{task_id}/vote/", {"value": {"text": ENGLISH[0]}},
                  format="json")
    assert ok.status_code == 201
