"""Searching a step's decisions: Lena looks for the captions about boats among those a length step dropped (full-text
search: "boat" finds "fishing boats"), a phrase, and the captions a length step kept that the capitalisation step
then dropped ("kept at step 1 and dropped at step 2"); a bad step reference says why, never a 500."""
import pytest
from django.urls import reverse

from curation.models import FilterDecision

from .test_run_honesty import make_collection, make_run

pytestmark = pytest.mark.django_db

STEPS = [{"filter": "test_long_enough", "params": {"min_words": 7}}, {"filter": "test_starts_capitalised"}]


def _decisions(client, run, step, **query):
    response = client.get(reverse("run-step", args=[run.pk, step]), query, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.content.decode()


def test_a_search_finds_words_by_their_stem_and_phrases_within_a_tab(alice_client):
    run = make_run(make_collection(), STEPS)
    html = _decisions(alice_client, run, 0, tab="drop", q="boat")
    assert "fishing boats moored in the harbour" in html
    assert "two surfers waiting for a wave" not in html and "a lighthouse on a rocky point" not in html
    html = _decisions(alice_client, run, 1, tab="drop", q='"low tide"')
    assert "kids building a sandcastle at low tide" in html and "a kite surfer" not in html
    html = _decisions(alice_client, run, 1, tab="drop", q="harbour")  # dropped earlier: never reached step 2
    assert "Nothing here" in html and "search and other steps" in html


def test_kept_at_one_step_and_dropped_at_another(alice_client):
    run = make_run(make_collection(), STEPS)
    kept_then_dropped = {"kids building a sandcastle at low tide", "a dog chasing a frisbee on the sand",
                         "an old couple walking along the promenade", "a kite surfer jumping over the waves"}
    for query in ({"also": "2:drop"}, {"also_step": "2", "also_outcome": "drop"}):
        html = _decisions(alice_client, run, 0, tab="keep", **query)
        assert all(text in html for text in kept_then_dropped), query
        assert "Tourists eating ice cream by the sea wall" not in html
        assert "Only items whose final outcome is <strong>drop</strong> at step 2." in html
    # The same question from step 2's side, with a word: dropped here and kept at step 1, about a dog.
    html = _decisions(alice_client, run, 1, tab="drop", also="1:keep", q="dog")
    assert "a dog chasing a frisbee on the sand" in html and "kite" not in html
    # A curator keeps the kite surfer at step 2: it leaves the "dropped at step 2" list.
    kite = FilterDecision.objects.get(run=run, step=1, caption__text__startswith="a kite surfer")
    FilterDecision.objects.filter(pk=kite.pk).update(override="keep")
    html = _decisions(alice_client, run, 0, tab="keep", also="2:drop")
    assert "a kite surfer" not in html and "a dog chasing a frisbee" in html


def test_bad_step_references_and_long_searches_are_explained(alice_client):
    run = make_run(make_collection(), STEPS)
    html = _decisions(alice_client, run, 0, tab="keep", also="9:keep,first:drop,1:keep")
    assert "This run has no step 9." in html and "&#x27;first:drop&#x27; is not step:outcome" in html
    assert "Step 1 is this step." in html
    html = _decisions(alice_client, run, 0, tab="drop", q="wave " * 60)
    assert "limited to 200 characters" in html


def test_a_collection_page_links_to_its_runs_and_the_list_shows_only_those(alice_client):
    seaside = make_collection()
    other = make_collection("another harbour")
    mine, theirs = make_run(seaside, STEPS), make_run(other, STEPS)
    page = alice_client.get(seaside.get_absolute_url()).content.decode()
    assert f'href="{reverse("run-list")}?collection={seaside.pk}" data-role="collection-runs"' in page
    html = alice_client.get(reverse("run-list"), {"collection": seaside.pk}).content.decode()
    assert f'href="{mine.get_absolute_url()}"' in html and f'href="{theirs.get_absolute_url()}"' not in html
    assert f"Filter runs of {seaside.name}" in html


def test_the_api_searches_a_steps_decisions_and_combines_steps(alice_client):
    run = make_run(make_collection(), STEPS)
    url = f"/api/runs/{run.pk}/decisions/"
    data = alice_client.get(url, {"step": 0, "q": "boat"}).json()
    texts = {FilterDecision.objects.get(pk=row["id"]).caption.text for row in data["results"]}
    assert texts == {"fishing boats moored in the harbour"}
    data = alice_client.get(url, {"step": 0, "outcome": "keep", "also": "2:drop"}).json()
    assert data["count"] == 4
    refused = alice_client.get(url, {"also": "2:drop"})
    assert refused.status_code == 400 and "give the step" in str(refused.json()["also"])
    assert alice_client.get(url, {"step": 0, "also": "7:keep"}).status_code == 400
