"""The Django admin lists pipelines, runs (with their chunks), decisions, reviews, artifacts and releases, for a
site administrator looking something up; they change only through the pages, API and commands that check them."""
import pytest
from django.urls import reverse

from curation.models import Collection, FilterDecision, FilterRun, Image, Pipeline, RunChunk
from releases.models import Release

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_with_a_decision():
    collection = Collection.objects.create(name="admin harbour")
    image = Image.objects.create(collection=collection, external_id="quay-1", status="ready")
    pipeline = Pipeline.objects.create(name="quay pipeline", steps=[{"filter": "image_size"}])
    run = FilterRun.objects.create(collection=collection, pipeline=pipeline, status=FilterRun.Status.DONE,
                                   snapshot=[{"filter": "image_size", "target": "image"}])
    RunChunk.objects.create(run=run, index=0, item_ids=[image.pk], status="done")
    decision = FilterDecision.objects.create(run=run, step=0, filter_name="image_size", image=image, outcome="drop",
                                             reason="too_small")
    Release.objects.create(name="quay release", config={"collections": [collection.pk]})
    return run, decision


@pytest.mark.parametrize("model", ["curation_pipeline", "curation_filterrun", "curation_filterdecision",
                                   "curation_review", "curation_filterartifact", "releases_release",
                                   "releases_releaseitem"])
def test_an_administrator_finds_each_model_in_the_admin(admin_client, run_with_a_decision, model):
    response = admin_client.get(reverse(f"admin:{model}_changelist"))
    assert response.status_code == 200


def test_a_run_and_a_decision_open_read_only_and_cannot_be_changed_there(admin_client, run_with_a_decision):
    run, decision = run_with_a_decision
    page = admin_client.get(reverse("admin:curation_filterrun_change", args=[run.pk])).content.decode()
    assert "too_small" not in page and "quay pipeline" in page and "Run chunks" in page
    assert admin_client.get(reverse("admin:curation_filterdecision_change", args=[decision.pk])).status_code == 200
    posted = admin_client.post(reverse("admin:curation_filterdecision_change", args=[decision.pk]),
                               {"override": "keep"})
    assert posted.status_code == 403
    decision.refresh_from_db()
    assert decision.override == ""
    assert admin_client.get(reverse("admin:curation_filterdecision_add")).status_code == 403
