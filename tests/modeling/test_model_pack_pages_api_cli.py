"""The model pack from the page, the API and the command line: Carol (admin) registers a directory, Alice
(curator) reads the pack and starts an embedding job but cannot register, bad input gets a clear message."""
import shutil

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from curation.models import Collection
from pack.models import EmbeddingJob, PretrainedModel


@pytest.fixture
def carol_client(client, carol):
    client.force_login(carol)
    return client


@pytest.fixture
def copied(models_dir, _tiny_clip_source):
    shutil.copytree(_tiny_clip_source, models_dir / "tiny-clip")
    return models_dir / "tiny-clip"


def test_carol_registers_a_directory_on_the_model_pack_page(carol_client, copied):
    page = carol_client.get(reverse("pretrained-list"))
    assert b"Register a model directory" in page.content and b"minilm-l6-v2" in page.content
    response = carol_client.post(reverse("pretrained-list"), {"directory": "tiny-clip", "name": "tiny-clip",
                                                              "licence": "MIT", "source": "test"})
    model = PretrainedModel.objects.get(name="tiny-clip")
    assert response.status_code == 302 and response["Location"] == model.get_absolute_url()
    detail = carol_client.get(model.get_absolute_url())
    assert model.files["model.safetensors"].encode() in detail.content
    checked = carol_client.post(model.get_absolute_url())
    assert b"match their sha256" in checked.content


def test_the_page_shows_why_a_directory_is_refused_and_keeps_the_form(carol_client, copied):
    (copied / "pytorch_model.bin").write_bytes(b"pickle")
    response = carol_client.post(reverse("pretrained-list"), {"directory": "tiny-clip", "name": "x", "licence": "MIT"})
    assert response.status_code == 400
    assert b"pytorch_model.bin" in response.content and b'value="tiny-clip"' in response.content
    assert not PretrainedModel.objects.filter(name="x").exists()


def test_alice_reads_the_pack_but_cannot_register(alice_client, copied):
    page = alice_client.get(reverse("pretrained-list"))
    assert page.status_code == 200 and b"Register a model directory" not in page.content
    alice_client.post(reverse("pretrained-list"), {"directory": "tiny-clip", "name": "t", "licence": "MIT"})
    assert not PretrainedModel.objects.filter(name="t").exists()
    api = alice_client.post("/api/pretrained-models/", {"directory": "tiny-clip", "name": "t", "licence": "MIT"},
                            content_type="application/json")
    assert api.status_code == 403


def test_the_api_registers_lists_and_verifies(carol_client, copied):
    created = carol_client.post("/api/pretrained-models/", {"directory": "tiny-clip", "name": "tiny-clip",
                                                            "licence": "MIT"}, content_type="application/json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["kind"] == "clip" and body["embedding_dim"] == 16 and body["key"].startswith("tiny-clip@")
    again = carol_client.post("/api/pretrained-models/", {"directory": "tiny-clip", "name": "tiny-clip",
                                                          "licence": "MIT"}, content_type="application/json")
    assert again.status_code == 409 and again.json()["code"] == "duplicate"
    no_licence = carol_client.post("/api/pretrained-models/", {"directory": "tiny-clip", "name": "other",
                                                               "licence": " "}, content_type="application/json")
    assert no_licence.status_code == 400
    listed = carol_client.get("/api/pretrained-models/").json()
    names = [m["name"] for m in (listed["results"] if isinstance(listed, dict) else listed)]
    assert {"tiny-clip", "minilm-l6-v2"} <= set(names)
    (copied / "config.json").write_text((copied / "config.json").read_text() + " ")
    verified = carol_client.post(f"/api/pretrained-models/{body['id']}/verify/")
    assert verified.status_code == 400 and "config.json" in verified.json()["detail"]


def test_an_embedding_job_from_the_api_without_a_model_is_a_clear_400(alice_client, models_dir):
    collection = Collection.objects.create(name="c")
    response = alice_client.post("/api/embedding-jobs/", {"collection": collection.pk},
                                 content_type="application/json")
    assert response.status_code == 400 and "add-pretrained" in response.json()["detail"]
    missing = alice_client.post("/api/embedding-jobs/", {"collection": 999999}, content_type="application/json")
    assert missing.status_code == 404


def test_alice_embeds_a_collection_from_its_page_and_follows_the_job(alice_client, tiny_clip):
    collection = Collection.objects.create(name="photos")
    page = alice_client.get(collection.get_absolute_url())
    assert b"Embed images and captions with" in page.content and b"tiny-clip" in page.content
    response = alice_client.post(reverse("collection-embed", args=[collection.pk]), {"model": "tiny-clip"})
    job = EmbeddingJob.objects.get()
    assert response.status_code == 302 and response["Location"] == job.get_absolute_url()
    card = alice_client.get(job.get_absolute_url(), HTTP_HX_REQUEST="true")
    assert b'id="embedding-progress"' in card.content and b"<html" not in card.content
    api = alice_client.get(f"/api/embedding-jobs/{job.pk}/").json()
    assert api["model_key"] == tiny_clip.key and api["status"] in ("queued", "running", "done")


def test_a_collection_page_without_a_model_says_which_stages_cannot_run(alice_client, models_dir):
    collection = Collection.objects.create(name="plain")
    page = alice_client.get(collection.get_absolute_url())
    assert b"No image-text model is registered" in page.content


def test_the_command_line_registers_lists_and_verifies(db, copied, capsys):
    call_command("models", "add-pretrained", str(copied), "--name", "tiny-clip", "--licence", "MIT")
    assert "Registered tiny-clip@" in capsys.readouterr().out
    call_command("models", "pretrained")
    listing = capsys.readouterr().out
    assert "tiny-clip@" in listing and "minilm-l6-v2@" in listing
    call_command("models", "verify", "tiny-clip")
    assert "all" in capsys.readouterr().out
    with pytest.raises(CommandError, match="licence"):
        call_command("models", "add-pretrained", str(copied), "--name", "again")
    with pytest.raises(CommandError, match="already registered"):
        call_command("models", "add-pretrained", str(copied), "--name", "tiny-clip", "--licence", "MIT")


def test_the_old_model_commands_still_work(db, capsys):
    call_command("models")
    assert "No model versions." in capsys.readouterr().out
    with pytest.raises(CommandError, match="Unknown kind"):
        call_command("models", "list", "nonsense")
