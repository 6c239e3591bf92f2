"""Write, then rate, then the best caption: three writers caption two photos, three judges rate every
written caption on the 0-100 slider of the rating campaign the write campaign feeds, and Alice's
results show the best caption of each photo chosen by Bradley-Terry (or the mean rating; ROVER only
when she asks for it), with its score and method; the dashboard counts what was written and chosen."""
import csv
import io

import pytest
from django.urls import reverse

from annotation import results
from annotation.aggregation import aggregate_campaign
from annotation.best_caption import comparisons, rating_value
from annotation.kinds import INFORMATIVENESS_SCORE, QUALITY
from annotation.routing import next_task, submit_vote, worker_for_user
from curation.models import Caption

from .conftest import make_annotators, make_collection

pytestmark = pytest.mark.django_db

# Per photo, the three writers' captions and the three judges' scores of each.
CAPTIONS = {
    "img-0": {"A black dog leaps to catch a red frisbee on the lawn.": (90, 80, 85),
              "A dog plays outside on the grass.": (60, 70, 50),
              "An animal in a garden with some trees.": (20, 30, 10)},
    "img-1": {"A small fishing boat moored in the harbour at dawn.": (70, 60, 80),
              "A white boat on calm water near the old harbour wall.": (70, 60, 80),  # judged as well: a tie
              "Boats and water near a quiet town.": (30, 40, 20)},
}
TEXTS = {text: image for image, texts in CAPTIONS.items() for text in texts}


@pytest.fixture
def written(make_campaign, django_user_model):
    writers = make_annotators(django_user_model, 3, prefix="writer")
    judges = make_annotators(django_user_model, 3, prefix="judge")
    rating = make_campaign("informativeness_score", members=judges, name="rate the written captions",
                           votes_per_item=3)
    rating.tasks.all().delete()  # only the written captions are rated
    write = make_campaign("write", members=writers, collection=make_collection(name="two photos", n=2),
                          votes_per_item=3, rate_campaign=rating, name="caption two photos")
    for i, user in enumerate(writers):
        worker = worker_for_user(user)
        while (served := next_task(write, worker)).task is not None:
            text = list(CAPTIONS[served.task.image.external_id])[i]
            submit_vote(write, worker, served.task.pk, {"text": text}, seconds=20.0)
    for j, user in enumerate(judges):
        worker = worker_for_user(user)
        while (served := next_task(rating, worker)).task is not None:
            text = served.task.caption.text
            submit_vote(rating, worker, served.task.pk, {"score": CAPTIONS[TEXTS[text]][text][j]}, seconds=3.0)
    return write, rating


def by_image(rows):
    return {r["image_external_id"]: r for r in rows}


def test_written_captions_are_rated_and_bradley_terry_picks_the_best_per_photo(written):
    write, rating = written
    assert rating.tasks.count() == 6 and rating.votes.count() == 18
    method, rows = results.results_rows(write)
    assert method == "bradley_terry"
    rows = by_image(rows)
    best = rows["img-0"]
    text = "A black dog leaps to catch a red frisbee on the lawn."
    assert (best["consensus"], best["method"], best["tie"], best["votes"]) == (text, "bradley_terry", False, 3)
    assert best["consensus_caption_id"] == Caption.objects.get(text=text, origin=Caption.Origin.CROWD).pk
    assert 0.5 < best["confidence"] <= 1.0  # its share of the photo's Bradley-Terry strengths
    tied = rows["img-1"]
    first = min(Caption.objects.filter(text__in=list(CAPTIONS["img-1"])[:2]).values_list("pk", flat=True))
    assert tied["tie"] is True and tied["consensus_caption_id"] == first


def test_the_mean_rating_and_rover_are_options(written):
    write, _ = written
    rows = by_image(results.results_rows(write, method="mean_rating")[1])
    assert rows["img-0"]["method"] == "mean_rating" and rows["img-0"]["confidence"] == pytest.approx(0.85)
    assert rows["img-0"]["consensus"] == "A black dog leaps to catch a red frisbee on the lawn."
    assert rows["img-1"]["tie"] is True and rows["img-1"]["confidence"] == pytest.approx(0.7)
    aggregate_campaign(write.pk)
    rover = by_image(results.results_rows(write, method="rover")[1])
    assert rover["img-0"]["method"] == "rover" and rover["img-0"]["consensus"]
    assert rover["img-0"]["consensus_caption_id"] is None  # a sentence nobody wrote


def test_a_photo_whose_captions_nobody_compared_falls_back_to_the_mean_rating(written):
    write, rating = written
    # Only the first judge's ratings of img-0 stay: one rater, but all three captions rated differently,
    # so there are comparisons for img-0; img-1 keeps none of its votes.
    judge = rating.votes.order_by("worker_id").values_list("worker_id", flat=True).first()
    rating.votes.exclude(worker_id=judge).delete()
    rating.votes.filter(task__caption__text__in=list(CAPTIONS["img-1"])).delete()
    rows = by_image(results.results_rows(write)[1])
    assert rows["img-0"]["method"] == "bradley_terry"
    assert rows["img-1"]["consensus"] is None and rows["img-1"]["votes"] == 3  # written, not rated yet
    rating.votes.filter(task__caption__text="An animal in a garden with some trees.").delete()
    rating.votes.filter(task__caption__text="A dog plays outside on the grass.").delete()
    rows = by_image(results.results_rows(write)[1])
    assert rows["img-0"]["method"] == "mean_rating" and rows["img-0"]["confidence"] == pytest.approx(0.9)


def test_the_results_page_the_export_and_the_dashboard_of_the_write_campaign(written, alice_client):
    write, _ = written
    page = alice_client.get(reverse("campaign-results", args=[write.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and "Best caption" in html
    assert "A black dog leaps to catch a red frisbee on the lawn." in html and "bradley_terry" in html
    exported = list(csv.DictReader(io.StringIO(b"".join(
        alice_client.get(reverse("campaign-results-export", args=[write.pk, "csv"])).streaming_content).decode())))
    assert [(r["consensus"], r["method"], r["tie"]) for r in exported] == [
        (r["consensus"], r["method"], "true" if r["tie"] else "false") for r in results.results_rows(write)[1]]
    dashboard = alice_client.get(reverse("campaign-detail", args=[write.pk])).content.decode()
    assert 'data-role="captions-written">6<' in dashboard
    assert 'data-role="images-covered">2 ' in dashboard and 'data-role="best-chosen">2<' in dashboard
    assert "2 by Bradley-Terry" in dashboard


def test_a_write_campaign_without_a_rating_campaign_says_so(make_campaign, bob, alice_client):
    write = make_campaign("write", members=[bob], collection=make_collection(name="one photo", n=1))
    worker = worker_for_user(bob)
    submit_vote(write, worker, next_task(write, worker).task.pk, {"text": "A red bus drives past the old harbour."})
    dashboard = alice_client.get(reverse("campaign-detail", args=[write.pk])).content.decode()
    assert 'data-role="captions-written">1<' in dashboard and 'data-role="best-chosen">—<' in dashboard
    assert "No rating campaign receives these captions" in dashboard
    (row,) = results.results_rows(write)[1]
    assert (row["votes"], row["consensus"]) == (1, None)


def test_ratings_become_numbers_and_comparisons_within_one_rater_and_photo():
    assert rating_value(INFORMATIVENESS_SCORE, {"score": 75}) == 0.75
    assert rating_value(QUALITY, {"label": "good"}) == 1.0 and rating_value(QUALITY, {"label": "bad"}) == 0.0
    captions = {1: (10, "a"), 2: (10, "b"), 3: (11, "c")}
    rated = [(7, 1, 0.9), (7, 2, 0.4), (7, 3, 0.1), (8, 1, 0.5), (8, 2, 0.5)]
    assert comparisons(rated, captions) == [(7, 1, 2, 1)]  # rater 8 tied; caption 3 is another photo
