"""Alice searches a whole collection's captions by their words (issue 24 item 6): the search page's "Words"
mode, the API's ``mode=words`` and ``manage.py search --words``. PostgreSQL full text with English stemming,
paginated, the match marked, no model needed; bad input is a clear 400 or CommandError."""
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from curation.models import Caption, Collection, Image
from curation.word_search import search_words

pytestmark = pytest.mark.django_db

HARBOUR = [
    ("a fishing boat moored in the harbour at dawn", Caption.Origin.ALT_TEXT),
    ("two kayakers paddling past moored sailboats", Caption.Origin.CROWD),
    ("an old lighthouse above a rocky harbour", Caption.Origin.MUSEUM),
    ("a cyclist waits at a red traffic light in Lisbon", Caption.Origin.DATASET),
    ("fresh sardines grilled on a street stall", Caption.Origin.WEB_COMMENT),
]


@pytest.fixture
def harbour():
    collection = Collection.objects.create(name="Harbour town", language="en")
    for n, (text, origin) in enumerate(HARBOUR):
        image = Image.objects.create(collection=collection, external_id=f"h{n}", status=Image.Status.READY)
        Caption.objects.create(image=image, text=text, origin=origin)
    other = Collection.objects.create(name="Elsewhere", language="en")
    image = Image.objects.create(collection=other, external_id="x", status=Image.Status.READY)
    Caption.objects.create(image=image, text="a boat moored in another harbour", origin=Caption.Origin.DATASET)
    return collection


def _texts(found) -> list[str]:
    return [hit.text for hit in found.rows]


def test_words_find_the_collections_captions_and_none_of_another_collection(harbour):
    found = search_words(harbour, "harbour")

    assert sorted(_texts(found)) == ["a fishing boat moored in the harbour at dawn",
                                     "an old lighthouse above a rocky harbour"]
    assert found.total == 2


@pytest.mark.skipif(connection.vendor != "postgresql", reason="stemming and websearch syntax are PostgreSQL's")
def test_english_stemming_phrases_and_exclusions_follow_the_websearch_syntax(harbour):
    assert _texts(search_words(harbour, "paddle")) == ["two kayakers paddling past moored sailboats"]
    assert sorted(_texts(search_words(harbour, "moored -kayakers"))) == ["a fishing boat moored in the harbour at dawn"]
    assert _texts(search_words(harbour, '"red traffic light"')) == ["a cyclist waits at a red traffic light in Lisbon"]
    assert _texts(search_words(harbour, '"light red traffic"')) == []


def test_each_hit_marks_its_match_and_keeps_the_whole_text_around_it(harbour):
    hit = search_words(harbour, "lighthouse").rows[0]

    assert "".join(text for text, _ in hit.pieces) == "an old lighthouse above a rocky harbour"
    assert [text for text, match in hit.pieces if match] == ["lighthouse"]
    assert hit.origin == "museum"


def test_results_come_a_page_at_a_time(harbour):
    first = search_words(harbour, "a", per_page=2) if connection.vendor != "postgresql" else \
        search_words(harbour, "moored or harbour or red or sardines", per_page=2)
    later = search_words(harbour, first.query, page=2, per_page=2)

    assert first.total == 5 and first.page.paginator.num_pages == 3
    assert len(first.rows) == 2 and len(later.rows) == 2
    assert not {h.id for h in first.rows} & {h.id for h in later.rows}


# --- The page ------------------------------------------------------------------------------------


def test_the_collection_page_links_to_the_word_search(alice_client, harbour):
    page = alice_client.get(harbour.get_absolute_url()).content.decode()

    assert f'{reverse("collection-search", args=[harbour.pk])}?mode=words' in page


def test_the_search_page_in_words_mode_shows_marked_captions_origin_and_image_links_without_a_model(
        alice_client, harbour):
    response = alice_client.get(reverse("collection-search", args=[harbour.pk]), {"q": "lighthouse", "mode": "words"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "an old <mark>lighthouse</mark> above a rocky harbour" in page
    assert "Museum description" in page
    image = Caption.objects.get(text__startswith="an old lighthouse").image_id
    assert reverse("image-detail", args=[image]) in page
    assert "No model registered" not in page and "1 caption matches" in page


def test_the_word_results_page_links_keep_the_query_and_mode(alice_client, harbour):
    query = "moored or harbour or red or sardines" if connection.vendor == "postgresql" else "a"
    response = alice_client.get(reverse("collection-search", args=[harbour.pk]),
                                {"q": query, "mode": "words", "per_page": 2}, HTTP_HX_REQUEST="true")

    page = response.content.decode()
    assert page.lstrip().startswith('<section id="search-results"')
    assert "5 captions match" in page
    assert "Page 1 of 3" in page and "page=2" in page and "mode=words" in page and "per_page=2" in page


def test_a_caption_with_markup_is_shown_as_text(alice_client, harbour):
    image = harbour.images.first()
    Caption.objects.create(image=image, text="<script>alert(1)</script> harbour seagull",
                           origin=Caption.Origin.ALT_TEXT)

    page = alice_client.get(reverse("collection-search", args=[harbour.pk]),
                            {"q": "seagull", "mode": "words"}).content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; harbour <mark>seagull</mark>" in page


def test_a_megabyte_caption_is_found_and_shown_as_a_window_around_its_match(harbour):
    image = harbour.images.first()
    text = "sand dune " * 5_000 + "a lone albatross " + " ".join(f"wave{n}" for n in range(150_000))
    Caption.objects.create(image=image, text=text, origin=Caption.Origin.WEB_COMMENT)

    (hit,) = search_words(harbour, "albatross").rows

    shown = "".join(piece for piece, _ in hit.pieces)
    assert len(shown) <= 602 and shown.startswith("…") and shown.endswith("…")
    assert [piece for piece, match in hit.pieces if match] == ["albatross"]


def test_an_overlong_query_is_a_400_with_the_reason(alice_client, harbour):
    response = alice_client.get(reverse("collection-search", args=[harbour.pk]), {"q": "boat " * 60, "mode": "words"})

    assert response.status_code == 400 and "at most 200 characters" in response.content.decode()


# --- The API -------------------------------------------------------------------------------------


def test_the_api_answers_a_page_of_captions_with_their_highlight(alice_client, harbour):
    response = alice_client.get(reverse("api-collection-search", args=[harbour.pk]),
                                {"q": "sardines", "mode": "words", "per_page": 10})

    data = response.json()
    assert response.status_code == 200
    assert data["mode"] == "words" and data["count"] == 1 and data["page"] == 1 and data["per_page"] == 10
    (hit,) = data["results"]
    assert hit["text"] == "fresh sardines grilled on a street stall" and hit["origin"] == "web_comment"
    assert {"text": "sardines", "match": True} in hit["highlight"]


@pytest.mark.parametrize("params, field", [({"per_page": 500}, "per_page"), ({"page": "two"}, "page"),
                                           ({"q": ""}, "Type some words"), ({"k": 5}, "unknown parameter")])
def test_the_api_refuses_bad_parameters_with_a_400(alice_client, harbour, params, field):
    response = alice_client.get(reverse("api-collection-search", args=[harbour.pk]),
                                {"q": "boat", "mode": "words", **params})

    assert response.status_code == 400 and field in json.dumps(response.json())


def test_bob_the_annotator_cannot_search(bob_client, harbour):
    response = bob_client.get(reverse("api-collection-search", args=[harbour.pk]), {"q": "boat", "mode": "words"})

    assert response.status_code == 403


# --- The CLI -------------------------------------------------------------------------------------


def test_manage_py_search_words_prints_the_page_with_the_match_in_brackets(harbour):
    out = io.StringIO()
    call_command("search", str(harbour.pk), "sardines", "--words", stdout=out)

    text = out.getvalue()
    assert "1 caption(s) match; page 1 of 1." in text
    assert "fresh [sardines] grilled on a street stall" in text and "web_comment" in text


def test_manage_py_search_words_refuses_a_bad_page_size(harbour):
    with pytest.raises(CommandError, match="per_page is a whole number from 1 to 100"):
        call_command("search", str(harbour.pk), "boat", "--words", "--per-page", "0")
