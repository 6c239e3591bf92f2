"""Which fluency classifier did what, recorded everywhere it matters: beam candidates reranked by fluency
(the stored caption is the most fluent one, its metadata and the job name the version), refused clearly
when no fluency version is active; a captioner trained with a fluency strategy names the version that
scored its data; a release names the fluency versions behind its captions in its manifest.

Every model here is real and tiny: a fluency classifier trained on a small labelled campaign, captioners
trained for two epochs on solid-colour squares."""
from __future__ import annotations

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from curation.models import Caption
from modeling import engine, fluency, generation_job, registry
from modeling.captioning.provenance import version_entry
from modeling.generate import generate_captions, generated_captions, rerank_candidates, source_label
from modeling.models import GenerationJob, Kind, ModelVersion, TrainingRun
from releases.freeze import freeze
from releases.provenance import manifest_lines

from ..curation.release_helpers import make_release
from ..curation.test_fluency_filter import make_fluency_campaign, run_pipeline, train_tiny
from .test_captioning import tiny_release
from .test_generate import SMALL

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_model_cache():
    registry.clear_cache()  # versions are cached by pk: a reused pk must not load another test's weights
    yield
    registry.clear_cache()


_TRAINED: dict = {}  # the fluency classifier's weights and config, trained once for this module


@pytest.fixture
def fluency_version(alice, django_user_model) -> ModelVersion:
    """A tiny fluency classifier, trained (the first time; later tests register the same weights
    again, as training takes most of a minute) and activated."""
    if not _TRAINED:
        campaign, _ = make_fluency_campaign(alice, django_user_model)
        run = train_tiny(campaign, alice)
        assert run.status == TrainingRun.Status.DONE, run.error
        version = run.model_version
        _TRAINED.update(data=registry.read_storage(version.artifact, "weights"), config=version.config)
        # Judged on fewer items than the activation rule asks: activated on purpose (this tests reranking).
        return registry.activate(version, alice, force=True)
    name = registry.save_storage("modeling/versions/fluency/trained-once.pt", _TRAINED["data"])
    version = ModelVersion.objects.create(kind=Kind.FLUENCY, version=1, artifact=name, config=_TRAINED["config"],
                                          artifact_sha256=hashlib.sha256(_TRAINED["data"]).hexdigest())
    return registry.activate(version, alice)


def train_captioner(release, user, strategy="all", trainer="captioner-lstm") -> TrainingRun:
    run = engine.create_run(trainer, dict(SMALL, strategy=strategy), release=release, user=user)
    run = engine.train(run.pk)
    assert run.status == TrainingRun.Status.DONE, (run.error, run.log[-2000:])
    return run


def fake_captioner_run(user) -> TrainingRun:
    """A finished captioner run with a registered version but no weights: enough for what is refused
    before any model is loaded."""
    run = TrainingRun.objects.create(kind=Kind.CAPTIONER, config={"trainer": "captioner-lstm"},
                                     status=TrainingRun.Status.DONE, created_by=user)
    ModelVersion.objects.create(kind=Kind.CAPTIONER, version=1, run=run, artifact="none.pt", artifact_sha256="0" * 64,
                                config={"trainer": "captioner-lstm", "info": {"release": None}})
    return run


def test_reranking_stores_the_most_fluent_candidate_and_names_the_fluency_version(alice, fluency_version):
    # The classifier puts a fluent sentence above its scramble, whatever the beam scores say.
    beam = [("rides surfer wave a a", -0.5), ("a surfer rides a wave", -3.0), ("", -4.0)]
    ranked = rerank_candidates(beam, fluency_version)
    assert [r[0] for r in ranked] == ["a surfer rides a wave", "rides surfer wave a a", ""]
    assert [r[1] for r in ranked] == [-3.0, -0.5, -4.0] and ranked[2][2] is None
    assert ranked[0][2] > 0.5 > ranked[1][2]

    release, _, _ = tiny_release(n=4, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    captioner = train_captioner(release, alice).model_version
    plain = {c.image_id: c for c in generate_captions(captioner)}
    job = generation_job.job_create(runs=[captioner.run_id], user=alice, rerank=True)
    assert job.options["rerank"] and job.options["fluency_version"] == version_entry(fluency_version, role="rerank")
    lines = []
    job = generation_job.job_run(job.pk, echo=lines.append)
    assert job.status == GenerationJob.Status.DONE and job.done == job.total == len(plain), job.error
    assert lines[0] == f"Generating captions for {len(plain)} image(s)." and lines[-1].endswith(" images captioned.")

    reranked = list(generated_captions(captioner, fluency_version))
    assert {c.image_id for c in reranked} == set(plain)
    for caption in reranked:
        meta = caption.metadata
        assert caption.source == source_label(captioner, fluency_version) == \
            f"model captioner v{captioner.version} reranked by fluency v{fluency_version.version}"
        assert meta["fluency_version"] == {"pk": fluency_version.pk, "version": fluency_version.version,
                                           "trainer": "fluency-lstm4", "role": "rerank",
                                           "artifact_sha256": fluency_version.artifact_sha256}
        # The same beam as without reranking, ordered by f (highest first) as the classifier scores it.
        beam_texts = [t for t, _ in plain[caption.image_id].metadata["candidates"]]
        assert sorted(t for t, _, _ in meta["candidates"]) == sorted(beam_texts)
        expected = fluency.rerank([t for t in beam_texts if t.strip()], version=fluency_version)
        assert [[t, round(f, 6)] for t, _, f in meta["candidates"] if t.strip()] == \
            [[t, round(f, 6)] for t, f in expected]
        assert caption.text == expected[0][0] and meta["fluency"] == expected[0][1]
    # Run again: the captions are kept, nothing is duplicated.
    again = generation_job.job_run(generation_job.job_create(runs=[captioner.run_id], rerank=True).pk)
    assert again.status == "done" and again.done == again.total == len(plain)
    assert generated_captions(captioner, fluency_version).count() == len(reranked)


def test_reranking_without_an_active_fluency_version_is_refused_and_nothing_is_generated(alice, client):
    run = fake_captioner_run(alice)
    version = run.model_version
    with pytest.raises(fluency.NoFluencyModel, match="No fluency classifier is active"):
        generate_captions(version, rerank=True)
    with pytest.raises(generation_job.GenerationError, match="Rerank by fluency: No fluency classifier is active"):
        generation_job.job_create(runs=[run.pk], user=alice, rerank=True)
    with pytest.raises(CommandError, match="No fluency classifier is active"):
        call_command("generate", "--runs", str(run.pk), "--rerank-by-fluency", stdout=StringIO())

    client.force_login(alice)
    response = client.post("/api/generation-jobs/", {"runs": [run.pk], "rerank_by_fluency": True},
                           content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "no_active_version" and response.json()["field"] == "rerank"
    page = client.post(reverse("training-evaluation-campaign"), {"runs": [run.pk], "eval_kind": "quality",
                                                                 "name": "judge", "rerank": "on"}, follow=True)
    assert "No fluency classifier is active" in page.content.decode()
    assert not GenerationJob.objects.exists()
    assert not Caption.objects.filter(origin=Caption.Origin.MODEL).exists()


def test_a_fluency_strategy_run_records_the_version_that_scored_its_data(alice, alice_client, fluency_version):
    release, _, _ = tiny_release(n=4, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    weighted = train_captioner(release, alice, strategy="weighted_loss")
    recorded = weighted.data_summary["fluency_version"]
    scored = sum(weighted.data_summary[s]["captions"] for s in ("train", "val", "test"))
    assert recorded == version_entry(fluency_version, source="active fluency classifier", scored=scored)
    assert weighted.model_version.config["info"]["fluency_version"] == recorded
    page = alice_client.get(weighted.get_absolute_url()).content.decode()
    assert f"fluency scores: fluency v{fluency_version.version} (#{fluency_version.pk}, fluency-lstm4" in page

    plain = train_captioner(release, alice, strategy="all")
    assert plain.data_summary["fluency_version"] is None
    assert "fluency_version" not in plain.model_version.config["info"]

    # A release of the weighted captioner's reranked captions names the captioner and both fluency roles.
    generate_captions(weighted.model_version, rerank=True)
    collection_id = release.config["collections"][0]
    captions = make_release("generated", collections=[collection_id], origins=["model"])
    freeze(captions)
    items = list(captions.items.all())
    assert items and all(i.provenance["origin"] == "model" for i in items)
    for item in items:
        models = item.provenance["models"]
        assert models["captioner"] == version_entry(weighted.model_version, run=weighted.pk)
        assert models["fluency"] == [version_entry(fluency_version, role="captioner training data"),
                                     version_entry(fluency_version, role="rerank")]
    manifest = b"".join(manifest_lines(captions)).decode()
    assert manifest.count(f'"artifact_sha256":"{fluency_version.artifact_sha256}"') == 2 * len(items)


def test_a_release_frozen_from_a_fluency_filter_run_names_the_filter_version(alice, fluency_version):
    # Colour squares whose captions the fluency filter scores (threshold 0: every caption is kept).
    source, collection, _ = tiny_release(n=4, splits={"train": 0.5, "val": 0.0, "test": 0.5})
    run, decided = run_pipeline(collection, {"threshold": 0.0})
    assert decided and all(d.details["model_version"] == fluency_version.version for d in decided.values())
    release = make_release("filtered", collections=[collection.pk], run=run.pk,
                           splits={"train": 0.5, "val": 0.0, "test": 0.5})
    freeze(release)
    release.refresh_from_db()
    entry = version_entry(fluency_version, role="filter")
    for item in release.items.all():
        assert item.provenance["models"]["fluency"] == [entry], item.provenance
        assert item.provenance["models"]["scored_by"] == ["fluency"]
    header, first = list(manifest_lines(release))[:2]
    assert json.loads(first)["provenance"]["models"]["fluency"] == [entry]

    # A captioner trained on it takes its fluency scores, and their version, from the release.
    registry.deactivate(fluency_version)  # nothing may be scored by an active classifier now
    weighted = train_captioner(release, alice, strategy="rejection_sampling")
    captions = sum(weighted.data_summary[s]["captions"] for s in ("train", "val", "test"))
    assert weighted.data_summary["fluency_version"] == version_entry(
        fluency_version, source="release fluency filter", scored=captions)
    assert "fluency scores from the release's fluency filter decisions" in weighted.data_summary["notes"]
    assert source.pk != release.pk
