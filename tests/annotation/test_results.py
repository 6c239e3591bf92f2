"""Alice reads a campaign's results per item: the page, its CSV, JSON and Parquet downloads, the API
and ``manage.py campaign_results`` give the same rows with the same columns; the filters narrow
them; ties are flagged from the votes; only curators get them. The votes CSV of the page and of
``campaign export-votes`` have the same columns too."""
import csv
import io
import json

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import results
from annotation.aggregation import aggregate_campaign
from annotation.models import Task
from annotation.routing import next_task, submit_vote, worker_for_user
from annotation.vote_export import VOTE_COLUMNS

from .conftest import make_annotators

pytestmark = pytest.mark.django_db

SPLIT = 4  # the first four items get one GOOD and one BAD vote: ties


def vote_everything(campaign, user, label_of):
    worker = worker_for_user(user)
    while (served := next_task(campaign, worker)).task is not None:
        submit_vote(campaign, worker, served.task.pk, label_of(served.task), seconds=2.0)


@pytest.fixture
def quality(make_campaign, django_user_model):
    """A GOOD/BAD campaign of 12 items, 2 votes each: erin says GOOD to all, frank BAD to the first four."""
    erin, frank = make_annotators(django_user_model, 2, prefix="rater")
    campaign = make_campaign("quality", members=[erin, frank], votes_per_item=2)
    first = {t.pk for t in campaign.tasks.filter(role=Task.Role.REAL).order_by("position", "pk")[:SPLIT]}
    vote_everything(campaign, erin, lambda task: "good")
    vote_everything(campaign, frank, lambda task: "bad" if task.pk in first else "good")
    aggregate_campaign(campaign.pk)
    return campaign


def canon(row: dict) -> tuple:
    """A row from any of the three files (or the selector) as comparable values."""
    def num(v, cast):
        return None if v in ("", None) else cast(v)

    tie = row["tie"] if isinstance(row["tie"], bool) else row["tie"] == "true"
    return (int(row["task_id"]), row["part"] or "", int(row["image_id"]), row["image_external_id"] or "",
            num(row["caption_id"], int), row["caption_text"] or "", int(row["votes"]),
            row["consensus"] if row["consensus"] not in ("",) else None, num(row["confidence"], float), tie,
            row["method"], json.loads(row["vote_counts"]), num(row["consensus_caption_id"], int))


def read_csv(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))


def read_parquet(data: bytes) -> list[dict]:
    return pq.read_table(io.BytesIO(data)).to_pylist()


def test_the_table_and_its_three_exports_agree_row_for_row_in_the_ui_api_and_cli(quality, alice, alice_client,
                                                                                  tmp_path):
    method, expected = results.results_rows(quality)
    assert method == "majority" and len(expected) == 12
    page = alice_client.get(reverse("campaign-results", args=[quality.pk]))
    assert page.status_code == 200
    shown = list(page.context["page"].object_list)
    assert [canon(r) for r in shown] == [canon(r) for r in expected]
    html = page.content.decode()
    assert 'data-role="results-count">12<' in html and html.count('data-role="tie"><span class="badge') == SPLIT

    ui = {fmt: b"".join(alice_client.get(reverse("campaign-results-export", args=[quality.pk, fmt]))
                        .streaming_content if fmt == "csv" else
                        [alice_client.get(reverse("campaign-results-export", args=[quality.pk, fmt])).content])
          for fmt in ("csv", "json", "parquet")}
    api = APIClient()
    api.force_authenticate(alice)
    by_api = {fmt: api.get(f"/api/campaigns/{quality.pk}/results/{fmt}/").content for fmt in ("csv", "json", "parquet")}
    cli = {}
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"results.{fmt}"
        call_command("campaign_results", str(quality.pk), "--format", fmt, "--out", str(out), stdout=io.StringIO())
        cli[fmt] = out.read_bytes()

    want = [canon(r) for r in expected]
    for source in (ui, by_api, cli):
        assert list(read_csv(source["csv"])[0]) == list(results.COLUMNS)
        assert [canon(r) for r in read_csv(source["csv"])] == want
        document = json.loads(source["json"])
        assert document["columns"] == list(results.COLUMNS) and document["method"] == "majority"
        assert [canon(r) for r in document["rows"]] == want
        table = pq.read_table(io.BytesIO(source["parquet"]))
        assert table.column_names == list(results.COLUMNS)
        assert [canon(r) for r in table.to_pylist()] == want
    assert ui["parquet"] and read_parquet(ui["parquet"]) == read_parquet(cli["parquet"])


def test_ties_are_flagged_from_the_votes_and_a_tied_majority_shows_no_consensus(quality):
    _, rows = results.results_rows(quality)
    tied = [r for r in rows if r["tie"]]
    assert len(tied) == SPLIT
    for row in tied:
        assert row["consensus"] is None and row["confidence"] == 0.5
        assert json.loads(row["vote_counts"]) == {"bad": 1, "good": 1}
    agreed = [r for r in rows if not r["tie"]]
    assert {(r["consensus"], r["confidence"], r["votes"]) for r in agreed} == {("good", 1.0, 2)}
    # Dawid-Skene may break the tie by the raters' reliability; the votes still tie, and the row says so.
    _, ds = results.results_rows(quality, method="dawid_skene")
    assert sum(r["tie"] for r in ds) == SPLIT and all(r["consensus"] in ("good", "bad") for r in ds)


def test_filters_narrow_the_rows_on_every_interface(quality, alice, alice_client):
    def rows(**params):
        return results.results_rows(quality, filters=results.parse_filters(params))[1]

    assert len(rows(tie="1")) == SPLIT
    assert len(rows(consensus="good")) == 12 - SPLIT
    assert rows(min_votes="3") == [] and len(rows(min_votes="2")) == 12
    assert len(rows(confidence_min="0.9")) == 12 - SPLIT and len(rows(confidence_max="0.6")) == SPLIT
    some = rows()[5]
    found = rows(q=some["caption_text"][5:20].upper())
    assert some["task_id"] in {r["task_id"] for r in found} and len(found) < 12

    page = alice_client.get(reverse("campaign-results", args=[quality.pk]), {"tie": "1"})
    assert len(page.context["page"].object_list) == SPLIT
    assert "results.csv?tie=1" in page.content.decode()  # the downloads carry the filters
    csv_rows = read_csv(b"".join(alice_client.get(reverse("campaign-results-export", args=[quality.pk, "csv"]),
                                                  {"tie": "1"}).streaming_content))
    assert [canon(r) for r in csv_rows] == [canon(r) for r in rows(tie="1")]
    api = APIClient()
    api.force_authenticate(alice)
    body = api.get(f"/api/campaigns/{quality.pk}/results/", {"consensus": "good", "page_size": 5, "page": 2}).json()
    assert (body["count"], body["page"], body["pages"], len(body["results"])) == (8, 2, 2, 3)
    assert [canon(r) for r in body["results"]] == [canon(r) for r in rows(consensus="good")[5:]]
    out = io.StringIO()
    call_command("campaign_results", str(quality.pk), "--tie-only", "--format", "json", "--out", "-", stdout=out)
    assert len(json.loads(out.getvalue())["rows"]) == SPLIT


def test_bad_filters_get_a_clear_message_on_every_interface(quality, alice, alice_client):
    page = alice_client.get(reverse("campaign-results", args=[quality.pk]), {"min_votes": "many"})
    assert page.status_code == 400 and "“many” is not a whole number." in page.content.decode()
    page = alice_client.get(reverse("campaign-results", args=[quality.pk]),
                            {"confidence_min": "0.9", "confidence_max": "0.2"})
    assert page.status_code == 400 and "confidence range is empty" in page.content.decode()
    assert alice_client.get(reverse("campaign-results", args=[quality.pk]), {"method": "magic"}).status_code == 400
    assert alice_client.get(reverse("campaign-results-export", args=[quality.pk, "xlsx"])).status_code == 404
    api = APIClient()
    api.force_authenticate(alice)
    response = api.get(f"/api/campaigns/{quality.pk}/results/", {"confidence_min": "nan"})
    assert response.status_code == 400 and "confidence_min" in response.json()
    assert api.get(f"/api/campaigns/{quality.pk}/results/", {"page": "9"}).status_code == 400
    assert api.get(f"/api/campaigns/{quality.pk}/results/", {"method": "magic"}).json()["method"][0].startswith(
        "Unknown method 'magic'")
    assert api.get("/api/campaigns/424242/results/").status_code == 404
    with pytest.raises(CommandError, match="--min-votes"):
        call_command("campaign_results", str(quality.pk), "--min-votes", "-1", "--out", "-", stdout=io.StringIO())
    with pytest.raises(CommandError, match="Parquet is binary"):
        call_command("campaign_results", str(quality.pk), "--format", "parquet", "--out", "-", stdout=io.StringIO())


def test_only_curators_see_results(quality, bob, bob_client, client):
    assert bob_client.get(reverse("campaign-results", args=[quality.pk])).status_code == 403
    assert bob_client.get(reverse("campaign-results-export", args=[quality.pk, "csv"])).status_code == 403
    api = APIClient()
    api.force_authenticate(bob)
    assert api.get(f"/api/campaigns/{quality.pk}/results/").status_code == 403
    assert api.get(f"/api/campaigns/{quality.pk}/results/json/").status_code == 403
    client.logout()
    assert client.get(reverse("campaign-results", args=[quality.pk])).status_code == 302
    assert APIClient().get(f"/api/campaigns/{quality.pk}/results/").status_code in (401, 403)


def test_the_dashboard_links_to_the_results(quality, alice_client):
    html = alice_client.get(reverse("campaign-detail", args=[quality.pk])).content.decode()
    assert f'href="{reverse("campaign-results", args=[quality.pk])}"' in html


def test_the_votes_csv_of_the_page_and_of_the_command_have_the_same_columns_and_rows(quality, alice_client,
                                                                                     tmp_path):
    page = b"".join(alice_client.get(reverse("campaign-export", args=[quality.pk])).streaming_content)
    out = tmp_path / "votes.csv"
    call_command("campaign", "export-votes", str(quality.pk), "--out", str(out), stdout=io.StringIO())
    from_page, from_cli = read_csv(page), read_csv(out.read_bytes())
    assert list(from_page[0]) == list(from_cli[0]) == VOTE_COLUMNS
    assert from_page == from_cli and len(from_page) == 24


def test_the_page_states_the_tie_break_rule(quality, alice_client):
    html = alice_client.get(reverse("campaign-results", args=[quality.pk])).content.decode()
    assert "a tied majority has no label" in html
    quality.provider_config = {**(quality.provider_config or {}), "tie_break": "prefer:bad"}
    quality.save(update_fields=["provider_config"])
    html = alice_client.get(reverse("campaign-results", args=[quality.pk])).content.decode()
    assert "a tied majority takes “bad”" in html


def test_candidate_captions_get_one_row_per_caption_and_dimension(make_campaign, django_user_model):
    from curation.models import Caption, Collection, Image

    (judge,) = make_annotators(django_user_model, 1, prefix="judge")
    collection = Collection.objects.create(name="candidates", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    image = Image.objects.create(collection=collection, sha256="f" * 64, width=640, height=480, format="JPEG",
                                 external_id="cand-0", status=Image.Status.READY)
    first, second = (Caption.objects.create(image=image, text=t, origin=Caption.Origin.ALT_TEXT, source="s")
                     for t in ("A dog on a beach.", "A brown dog runs along the sea at sunset."))
    campaign = make_campaign("relevance_fluency", members=[judge], collection=collection, votes_per_item=1)
    worker = worker_for_user(judge)
    task = next_task(campaign, worker).task
    submit_vote(campaign, worker, task.pk, {"ratings": {str(first.pk): {"relevance": 2, "fluency": 4},
                                                        str(second.pk): {"relevance": 5, "fluency": 5}}})
    aggregate_campaign(campaign.pk)
    method, rows = results.results_rows(campaign, method="mean")
    assert method == "mean" and len(rows) == 4
    by_part = {r["part"]: r for r in rows}
    assert by_part[f"{second.pk}:relevance"]["caption_text"] == "A brown dog runs along the sea at sunset."
    assert (by_part[f"{first.pk}:relevance"]["consensus"], by_part[f"{first.pk}:fluency"]["consensus"]) == ("2", "4")
    assert by_part[f"{first.pk}:relevance"]["caption_id"] == first.pk and not any(r["tie"] for r in rows)


def test_a_page_without_filters_reads_only_its_tasks_and_shows_the_same_rows(quality, django_assert_max_num_queries):
    _, every = results.results_rows(quality)
    with django_assert_max_num_queries(15):  # a fixed number, whatever the size of the campaign
        method, page, n_rows = results.results_page(quality, page=2, per_page=5)
    assert (method, n_rows, page.number, page.paginator.num_pages) == ("majority", 12, 2, 3)
    assert [canon(r) for r in page.object_list] == [canon(r) for r in every[5:10]]
    _, filtered, n_tied = results.results_page(quality, filters=results.parse_filters({"tie": "1"}), per_page=3)
    assert n_tied == SPLIT and [r["tie"] for r in filtered.object_list] == [True] * 3
