"""Alice goes from a collection to its releases (issue 24 item 6): the collection page links to the release
list filtered to that collection, with a count; the filter finds a release that names the collection in its
config or selects from one of its filter runs, on the page and in the API."""
import pytest
from django.urls import reverse

from curation.models import Collection, FilterRun
from releases.models import Release

pytestmark = pytest.mark.django_db


@pytest.fixture
def gulls(alice):
    birds = Collection.objects.create(name="Gulls", language="en")
    ferns = Collection.objects.create(name="Ferns", language="en")
    run = FilterRun.objects.create(collection=birds, snapshot=[], status=FilterRun.Status.DONE, created_by=alice)
    Release.objects.create(name="gulls-raw", config={"collections": [birds.pk]})
    Release.objects.create(name="gulls-kept", config={"run": run.pk})  # an older config: the run alone
    Release.objects.create(name="ferns-v1", config={"collections": [ferns.pk]})
    Release.objects.create(name="both", config={"collections": [ferns.pk, birds.pk]})
    return birds, ferns


def _names(response) -> set[str]:
    page = response.content.decode()
    return {name for name in ("gulls-raw", "gulls-kept", "ferns-v1", "both") if f">{name}<" in page}


def test_the_collection_page_links_to_its_releases_with_their_count(alice_client, gulls):
    birds, ferns = gulls

    page = alice_client.get(birds.get_absolute_url()).content.decode()

    assert f'href="{reverse("release-list")}?collection={birds.pk}"' in page
    assert "Releases <span class=\"count\">(3)</span>" in page
    assert "(2)</span>" in alice_client.get(ferns.get_absolute_url()).content.decode()


def test_the_release_list_filtered_to_a_collection_shows_its_releases_alone(alice_client, gulls):
    birds, ferns = gulls

    response = alice_client.get(reverse("release-list"), {"collection": birds.pk})

    assert response.status_code == 200
    assert _names(response) == {"gulls-raw", "gulls-kept", "both"}
    assert "Releases of Gulls" in response.content.decode()
    assert _names(alice_client.get(reverse("release-list"), {"collection": ferns.pk})) == {"ferns-v1", "both"}
    assert _names(alice_client.get(reverse("release-list"))) == {"gulls-raw", "gulls-kept", "ferns-v1", "both"}


def test_a_collection_without_releases_offers_to_freeze_one(alice_client, gulls):
    empty = Collection.objects.create(name="Moss", language="en")

    response = alice_client.get(reverse("release-list"), {"collection": empty.pk})

    page = response.content.decode()
    assert _names(response) == set() and "No releases yet" in page
    assert f'{reverse("release-create")}?collection={empty.pk}' in page


def test_a_bad_or_unknown_collection_is_a_clear_error(alice_client, gulls):
    bad = alice_client.get(reverse("release-list"), {"collection": "gulls"})
    missing = alice_client.get(reverse("release-list"), {"collection": 999999})

    assert bad.status_code == 400 and "whole number" in bad.content.decode()
    assert missing.status_code == 404


def test_the_api_filters_releases_by_collection(alice_client, gulls):
    birds, _ = gulls

    response = alice_client.get("/api/releases/", {"collection": birds.pk})
    bad = alice_client.get("/api/releases/", {"collection": "gulls"})

    data = response.json()
    rows = data["results"] if isinstance(data, dict) else data
    assert response.status_code == 200 and {row["name"] for row in rows} == {"gulls-raw", "gulls-kept", "both"}
    assert bad.status_code == 400 and "integer" in bad.content.decode()
