"""Caption seeds (seed 001, Section 2) reach a release: a curator runs caption_seeds over a small museum
collection, the run writes one child caption per seed of each description it kept (origin "seed"), and a
release with "seed" among its origins ships those short captions instead of, or beside, the descriptions.
Running the chunks again, reconciling or running the pipeline a second time adds no seed caption twice.
The descriptions are written for this test, not taken from the paper."""
import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from curation.models import Caption, CaptionSeed, Collection, Pipeline, RunChunk
from curation.pipeline import executor
from curation.pipeline.seed_captions import save_chunk_seeds, seed_text
from curation.services import run_create
from releases import services
from releases.forms import ReleaseForm
from releases.models import Release

from .release_helpers import add_image

pytestmark = pytest.mark.django_db

DESCRIPTIONS = [
    "The knight, mounted on a black horse, pierces the serpent with his spear.",
    "A young woman plays the lute beside a window.",
    "A monk reads a book at a table by candlelight.",
    "View of the harbour at dusk, painted in oils.",  # no class words: no seed, dropped
]


@pytest.fixture
def museum():
    """Margit's first museum collection: four panels with one catalogue description each."""
    collection = Collection.objects.create(name="Altarpieces", language="en")
    for i, text in enumerate(DESCRIPTIONS):
        image = add_image(collection, seed=100 + i, external_id=f"panel-{i}")
        Caption.objects.create(image=image, text=text, origin=Caption.Origin.MUSEUM, language="en",
                               source="catalogue.tsv")
    return collection


def run_seeds(collection):
    pipeline = Pipeline.objects.create(name=f"seeds {Pipeline.objects.count()}", steps=[{"filter": "caption_seeds"}])
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    assert run.status == "done", run.error
    return run


def seed_captions(collection):
    return Caption.objects.filter(image__collection=collection, origin=Caption.Origin.SEED)


def release_of(collection, run=None, **config):
    config = {"collections": [collection.pk], "run": run.pk if run else None, "dedup": "none",
              "splits": {"train": 1.0, "val": 0.0, "test": 0.0}, "missing_image": "skip", **config}
    release = services.run_freeze(services.release_create(f"r{Release.objects.count()}", config, None).pk)
    assert release.status == Release.Status.FROZEN, release.error
    return release


def test_a_seed_is_rendered_as_a_short_caption():
    assert seed_text(["person", "slays", "dragon", "Saint George slays the dragon."]) == "person slays dragon"
    assert seed_text(["person", "on", "horse"]) == "person on horse"
    assert seed_text(["altar_piece", "with", "flower"]) == "altar piece with flower"


def test_a_run_writes_one_seed_caption_per_seed_of_each_kept_description(museum):
    run = run_seeds(museum)
    knight = Caption.objects.get(text=DESCRIPTIONS[0])
    harbour = Caption.objects.get(text=DESCRIPTIONS[3])
    found = {(s.subject, s.relation, s.object) for s in CaptionSeed.objects.filter(run=run, caption=knight)}
    children = seed_captions(museum).filter(parent=knight)
    assert ("knight", "pierces", "serpent") in found
    assert {c.text for c in children} == {" ".join(seed) for seed in found}
    assert "knight pierces serpent" in {c.text for c in children}
    for child in children:
        assert child.image_id == knight.image_id and child.language == "en"
        assert child.metadata["run"] == run.pk and child.metadata["filter"] == "caption_seeds"
    assert not seed_captions(museum).filter(parent=harbour).exists()  # dropped with no_seed: nothing to write
    assert not CaptionSeed.objects.filter(caption=harbour).exists()


def test_running_again_reconciling_or_a_second_run_adds_no_seed_caption_twice(museum):
    run = run_seeds(museum)
    before = sorted(seed_captions(museum).values_list("pk", "text"))
    assert before
    for chunk in RunChunk.objects.filter(run=run):  # a redelivered chunk
        executor.run_chunk(run.pk, chunk.index)
    executor.reconcile(run.pk, list(museum.images.values_list("pk", flat=True)))
    second = run_seeds(museum)
    assert sorted(seed_captions(museum).values_list("pk", "text")) == before
    assert CaptionSeed.objects.filter(run=second).count() == CaptionSeed.objects.filter(run=run).count()
    # and saving the same seeds by hand once more changes nothing either
    knight = Caption.objects.get(text=DESCRIPTIONS[0])
    save_chunk_seeds(run, {knight.pk: [["knight", "pierces", "serpent", DESCRIPTIONS[0]]]})
    assert sorted(seed_captions(museum).values_list("pk", "text")) == before


def test_a_later_run_does_not_judge_seed_captions_as_raw_text(museum):
    run_seeds(museum)
    second = run_seeds(museum)
    judged = set(second.decisions.values_list("caption_id", flat=True))
    assert judged == set(Caption.objects.filter(origin=Caption.Origin.MUSEUM).values_list("pk", flat=True))


def test_a_release_with_origin_seed_ships_the_seeds_and_not_the_descriptions(museum):
    run = run_seeds(museum)
    seeds = set(seed_captions(museum).values_list("text", flat=True))
    release = release_of(museum, run, origins=["seed"])
    texts = list(release.items.values_list("text", flat=True))
    assert sorted(texts) == sorted(seeds) and "knight pierces serpent" in texts
    assert not set(texts) & set(DESCRIPTIONS)
    item = release.items.get(text="knight pierces serpent")
    lineage = item.provenance["lineage"]
    assert [node["origin"] for node in lineage] == ["seed", "museum"] and lineage[1]["text"] == DESCRIPTIONS[0]
    assert [d["filter"] for d in item.provenance["decisions"]] == ["caption_seeds"]


def test_seeds_beside_descriptions_and_neither_by_default(museum):
    run = run_seeds(museum)
    seeds = set(seed_captions(museum).values_list("text", flat=True))
    kept = set(DESCRIPTIONS[:3])  # the harbour view gave no seed and was dropped
    both = release_of(museum, run, origins=["seed", "museum"])
    assert set(both.items.values_list("text", flat=True)) == seeds | kept
    default = release_of(museum, run)
    assert set(default.items.values_list("text", flat=True)) == kept


def test_without_a_run_seed_captions_are_shipped_only_when_chosen(museum):
    run_seeds(museum)
    seeds = set(seed_captions(museum).values_list("text", flat=True))
    assert set(release_of(museum, origins=["seed"]).items.values_list("text", flat=True)) == seeds
    assert not set(release_of(museum).items.values_list("text", flat=True)) & seeds


def test_the_form_the_api_and_the_command_offer_the_seed_origin(
        museum, alice_client, eager_celery, django_capture_on_commit_callbacks):
    run = run_seeds(museum)
    seeds = set(seed_captions(museum).values_list("text", flat=True))
    assert "seed" in dict(ReleaseForm().fields["origins"].choices)
    form = {"name": "seeds-form", "collections": [museum.pk], "run": run.pk, "origins": ["seed"],
            "split_train": "1", "split_val": "0", "split_test": "0", "seed": "0", "dedup": "none",
            "missing_image": "skip", "freeze": "on"}
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("release-create"), form)
    assert response.status_code == 302
    from_form = Release.objects.get(name="seeds-form")
    assert from_form.config["origins"] == ["seed"]
    assert set(from_form.items.values_list("text", flat=True)) == seeds
    config = {"collections": [museum.pk], "run": run.pk, "origins": ["seed"], "dedup": "none",
              "splits": {"train": 1.0, "val": 0.0, "test": 0.0}}
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post("/api/releases/", {"name": "seeds-api", "config": config, "freeze": True},
                                     content_type="application/json")
    assert response.status_code == 201, response.content
    assert set(Release.objects.get(name="seeds-api").items.values_list("text", flat=True)) == seeds
    response = alice_client.post("/api/releases/", {"name": "typo", "config": {**config, "origins": ["seeds"]}},
                                 content_type="application/json")
    assert response.status_code == 400 and "seed" in response.content.decode()
    out = io.StringIO()
    call_command("release", "create", "--name", "seeds-cli", "--collections", "Altarpieces", "--run", str(run.pk),
                 "--origins", "seed", "--splits", "1,0,0", "--dedup", "none", "--freeze", stdout=out)
    assert set(Release.objects.get(name="seeds-cli").items.values_list("text", flat=True)) == seeds
