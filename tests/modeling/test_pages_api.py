"""Pages and API of the modeling app: permissions, the new-run form with its errors, the live
progress fragment, the registry's Activate button, the comparison page, the API."""
import pytest
from django.urls import reverse

from annotation.models import Campaign
from curation.models import Collection
from modeling import engine
from modeling.models import Kind, ModelVersion, TrainingRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(alice):
    collection = Collection.objects.create(name="photos")
    return Campaign.objects.create(name="fluency <b>one</b>", kind="fluency", collection=collection)


def _done_run(tiny, **config):
    return engine.train(engine.create_run("test-tiny", {"device": "cpu", "epochs": 2, **config},
                                          name=config.pop("name", "")).pk)


def test_pages_need_curator(bob_client, tiny):
    from django.test import Client

    client = Client()
    run = _done_run(tiny)
    urls = [reverse("training-run-list"), reverse("training-run-create"), run.get_absolute_url(),
            reverse("model-list"), reverse("training-compare")]
    for url in urls:
        assert client.get(url).status_code == 302  # to the login page
        assert bob_client.get(url).status_code == 403
    version = run.model_version
    assert bob_client.post(reverse("model-activate", args=[version.pk])).status_code == 403
    version.refresh_from_db()
    assert not version.active


def test_new_run_form_queues_a_run(alice_client, alice, campaign, tiny, eager_celery,
                                   django_capture_on_commit_callbacks):
    page = alice_client.get(reverse("training-run-create"))
    assert page.status_code == 200 and b"test-tiny" in page.content and b"fluency &lt;b&gt;one" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("training-run-create"), {
            "trainer": "test-tiny", "campaign": campaign.pk, "epochs": "2", "seed": "5", "lr": "0.02",
            "device": "cpu", "name": "first <script>", "extra": '{"hidden": 6}'})
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.config == {"trainer": "test-tiny", "epochs": 2, "seed": 5, "lr": 0.02, "device": "cpu", "hidden": 6}
    assert run.campaign == campaign and run.created_by == alice
    assert run.status == TrainingRun.Status.DONE  # eager celery ran it
    detail = alice_client.get(run.get_absolute_url())
    assert detail.status_code == 200
    body = detail.content.decode()
    assert "first &lt;script&gt;" in body and "<polyline" in body and "Activate" in body
    assert "hx-trigger" not in body.split('id="training-progress"')[1].split(">")[0]  # finished: no polling


def test_new_run_form_errors_keep_input(alice_client, campaign, tiny):
    response = alice_client.post(reverse("training-run-create"), {
        "trainer": "test-tiny", "epochs": "0", "lr": "fast", "device": "tpu", "extra": "[1]", "seed": "3"})
    assert response.status_code == 400
    body = response.content.decode()
    for text in ("A whole number ≥ 1.", "A positive number.", "Choose auto, cpu or cuda.", "must be a JSON object",
                 "A fluency classifier trains on a campaign"):
        assert text in body
    assert 'value="3"' in body
    assert not TrainingRun.objects.exists()
    response = alice_client.post(reverse("training-run-create"), {"trainer": "nope", "device": "cpu"})
    assert response.status_code == 400 and "Choose a trainer." in response.content.decode()


def test_progress_fragment_polls_while_running(alice_client, tiny):
    run = engine.create_run("test-tiny", {"device": "cpu"})
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.RUNNING, epoch=1, epochs=3, loss=0.5,
                                                 history=[{"epoch": 0.5, "step": 2, "loss": 0.9},
                                                          {"epoch": 1, "step": 4, "loss": 0.6, "val_loss": 0.7,
                                                           "end": True}])
    url = reverse("training-run-progress", args=[run.pk])
    fragment = alice_client.get(url, HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert fragment.status_code == 200 and body.lstrip().startswith("{% comment %}") is False
    assert 'hx-trigger="every 1s"' in body and "<polyline" in body and "<circle" in body and "epoch 1 of 3" in body
    assert alice_client.get(url).status_code == 302  # no htmx: the page


def test_registry_activate_button(alice_client, alice, tiny):
    first, second = _done_run(tiny), _done_run(tiny)
    page = alice_client.get(reverse("model-list"))
    assert page.status_code == 200 and page.content.count(b">Activate</button>") == 2
    response = alice_client.post(reverse("model-activate", args=[second.model_version.pk]))
    assert response.status_code == 302
    assert ModelVersion.objects.get(active=True) == second.model_version
    alice_client.post(reverse("model-activate", args=[first.model_version.pk]))
    assert list(ModelVersion.objects.filter(active=True)) == [first.model_version]
    assert alice_client.get(reverse("model-activate", args=[first.model_version.pk])).status_code == 405


def test_compare_page(alice_client, tiny):
    a, b = _done_run(tiny, name="small", hidden=4), _done_run(tiny, name="big", hidden=16)
    TrainingRun.objects.filter(pk=a.pk).update(metrics={"BLEU-1": 0.5, "CIDEr": 0.2,
                                                        "baselines": {"random_guess": {"f1": 0.4}}})
    TrainingRun.objects.filter(pk=b.pk).update(metrics={"BLEU-1": 0.6, "CIDEr": 0.1})
    response = alice_client.get(reverse("training-compare"), {"runs": [a.pk, b.pk]})
    body = response.content.decode()
    assert response.status_code == 200
    assert "<strong>0.6000</strong>" in body and "<strong>0.2000</strong>" in body
    assert "baselines.random_guess.f1" in body and "<rect" in body
    assert alice_client.get(reverse("training-compare"), {"runs": "x"}).status_code == 400
    assert alice_client.get(reverse("training-compare"), {"runs": 99999}).status_code == 400


def test_evaluation_campaign_refuses_non_captioner(alice_client, tiny):
    run = _done_run(tiny)
    response = alice_client.post(reverse("training-evaluation-campaign"),
                                 {"runs": [run.pk], "eval_kind": "quality", "name": "eval"}, follow=True)
    assert "is not a finished captioner run" in response.content.decode()
    assert not Campaign.objects.filter(name="eval").exists()


def test_api_runs_and_versions(client, alice, bob, tiny, eager_celery, django_capture_on_commit_callbacks):
    client.force_login(bob)
    assert client.get("/api/training-runs/").status_code == 403
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/training-runs/", {"trainer": "test-tiny", "config": {"device": "cpu", "epochs": 1}},
                               content_type="application/json")
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    detail = client.get(f"/api/training-runs/{run_id}/").json()
    assert detail["status"] == "done" and detail["model_version"]
    bad = client.post("/api/training-runs/", {"trainer": "test-tiny", "config": {"device": "tpu"}},
                      content_type="application/json")
    assert bad.status_code == 400 and "Unknown device" in bad.json()["detail"]
    assert client.post("/api/training-runs/", {"trainer": "test-tiny", "release": 999},
                       content_type="application/json").status_code == 400
    assert client.get("/api/training-runs/", {"colour": "red"}).status_code == 400
    assert client.get("/api/training-runs/", {"kind": "fluency"}).json()["count"] == 1
    versions = client.get("/api/model-versions/", {"kind": Kind.FLUENCY}).json()
    assert versions["count"] == 1
    pk = versions["results"][0]["id"]
    activated = client.post(f"/api/model-versions/{pk}/activate/")
    assert activated.status_code == 200 and activated.json()["active"] is True
    assert client.get("/api/model-versions/", {"active": "maybe"}).status_code == 400
    assert client.get("/api/model-versions/", {"active": "true"}).json()["count"] == 1
