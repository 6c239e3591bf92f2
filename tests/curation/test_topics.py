"""LDA topic labels (seed 000, Section 4): one document per image, informative n-grams in fewer
than max_doc_freq of the comments, a topic distribution per image, stored for the CNN."""
import numpy as np
import pytest

from curation.models import Caption, Collection, FilterArtifact, FilterRun, Image, ImageTopics
from curation.pipeline import registry, topics
from curation.pipeline.base import KEEP, NA

# Comments in the style of two of the paper's topics (supplementary Table 3): Topic 185 "water and
# reflection" and Topic 132 "building". Each image gets three of its theme's comments.
WATER = [
    "The reflection in the water is lovely and the lake looks calm.",
    "Great reflection of the boat on the lake water.",
    "The river reflection and the calm water surface work well.",
    "Nice mirror reflection, the lake water is so still.",
    "The pier and its reflection in the calm lake make the image.",
]
BUILDING = [
    "The church tower and the old roof make a strong architecture shot.",
    "The building facade and the tower against the skyline are great.",
    "Love the arch of the church and the stone building.",
    "The cathedral roof and the tower lines lead the eye.",
    "The skyline with the tall tower and the old building works.",
]
PARAMS = {"n_topics": 2, "max_doc_freq": 0.6, "min_doc_count": 2, "max_iter": 50, "random_state": 7}


def theme_rows(n_images=8, extra=""):
    rows, caption_id = [], 0
    for image in range(1, n_images + 1):
        theme = WATER if image % 2 else BUILDING
        for k in range(3):
            caption_id += 1
            rows.append({"caption_id": caption_id, "image_id": image, "text": theme[(image + k) % 5] + extra,
                         "entity_types": [], "sha256": None, "phash": None, "score": None})
    return rows


@pytest.fixture(scope="module")
def fitted():
    flt = topics.LdaTopics(PARAMS)
    decisions = flt.decide_run(theme_rows())
    return flt, decisions


def test_images_of_the_same_theme_get_similar_distributions(fitted):
    flt, _ = fitted
    dist = {image: np.array(d) for image, d in flt.distributions.items()}
    water, building = [1, 3, 5, 7], [2, 4, 6, 8]
    assert all(abs(d.sum() - 1) < 1e-4 for d in dist.values())
    water_topic = {int(dist[i].argmax()) for i in water}
    building_topic = {int(dist[i].argmax()) for i in building}
    assert len(water_topic) == len(building_topic) == 1 and water_topic != building_topic
    assert min(dist[i].max() for i in dist) > 0.8
    assert np.abs(dist[1] - dist[3]).sum() < np.abs(dist[1] - dist[2]).sum()


def test_every_caption_is_kept_with_its_images_top_topic(fitted):
    flt, decisions = fitted
    assert len(decisions) == 24 and all(d.outcome == KEEP for d in decisions.values())
    first = decisions[1]
    assert first.details["top_topic"] == int(np.argmax(flt.distributions[1]))
    assert first.score == pytest.approx(max(flt.distributions[1]))
    assert "reflection" in first.details["topic_words"] or "water" in first.details["topic_words"]


def test_the_topics_words_are_the_themes_ngrams(fitted):
    flt, _ = fitted
    words = [set(ws) for ws in topics.topic_words(flt.model, 4)]
    assert any({"reflection", "water"} <= ws for ws in words)
    assert any("tower" in ws for ws in words)


def test_the_same_rows_and_random_state_give_the_same_topics(fitted):
    flt, _ = fitted
    again = topics.LdaTopics(PARAMS)
    again.decide_run(theme_rows())
    assert again.distributions == flt.distributions
    assert topics.model_to_bytes(again.model) == topics.model_to_bytes(flt.model)


def test_ngrams_in_too_many_comments_are_left_out_of_the_vocabulary():
    flt = topics.LdaTopics(PARAMS)
    flt.decide_run(theme_rows(extra=" Nice shot, great composition."))
    vocabulary = set(flt.model.vocabulary)
    assert {"shot", "composition", "great composition"}.isdisjoint(vocabulary)
    assert {"reflection", "tower"} <= vocabulary


def test_an_image_without_vocabulary_ngrams_is_not_labelled():
    rows = theme_rows() + [{"caption_id": 99, "image_id": 99, "text": "Wow, just wow!!!"}]
    flt = topics.LdaTopics(PARAMS)
    decisions = flt.decide_run(rows)
    assert (decisions[99].outcome, decisions[99].reason) == (NA, "no_topic_ngrams")
    assert 99 not in flt.distributions


def test_a_run_without_any_topic_ngrams_labels_nothing():
    rows = [{"caption_id": 1, "image_id": 1, "text": "Wow!"}, {"caption_id": 2, "image_id": 2, "text": "So good"}]
    flt = topics.LdaTopics(PARAMS)
    decisions = flt.decide_run(rows)
    assert {d.reason for d in decisions.values()} == {"no_vocabulary"}
    assert flt.model is None and topics.save_run_topics(flt, run=None) is None


# A first collection: six images, one critique each, in two themes (no n-gram in 10% of comments or more
# and in two comments at once, as the paper's bounds want).
FIRST_COLLECTION = [
    "The reflection of the pier in the calm lake is lovely.",
    "Calm lake water and a soft reflection of the boat.",
    "The old church tower against the evening skyline.",
    "Strong lines of the tower and the church roof.",
    "The lake reflection at dawn is very calm.",
    "The church roof and the stone tower are sharp.",
]


def first_collection_rows():
    return [{"caption_id": i + 1, "image_id": i + 1, "text": t} for i, t in enumerate(FIRST_COLLECTION)]


def test_the_papers_bounds_leave_a_first_collection_without_vocabulary():
    flt = topics.LdaTopics({"adapt_bounds": False})
    decisions = flt.decide_run(first_collection_rows())
    assert {d.reason for d in decisions.values()} == {"no_vocabulary"}


def test_a_first_collection_gets_topics_with_the_default_adaptive_bounds():
    flt = topics.LdaTopics({"random_state": 3, "max_iter": 50})
    decisions = flt.decide_run(first_collection_rows())
    assert all(d.outcome == KEEP for d in decisions.values())
    bounds = flt.model.meta["vocabulary_bounds"]
    assert bounds["adapted"] and bounds["n_topics"] <= 6 and flt.model.n_topics == bounds["n_topics"]
    assert {"reflection", "tower", "church"} <= set(flt.model.vocabulary)
    assert len(flt.distributions) == 6 and all(len(d) == flt.model.n_topics for d in flt.distributions.values())


def test_the_adaptive_bounds_leave_a_large_collection_as_the_paper_wants():
    flt = topics.LdaTopics(PARAMS)
    flt.decide_run(theme_rows(n_images=40))
    assert flt.model.meta["vocabulary_bounds"]["adapted"] is False
    assert flt.model.meta["vocabulary_bounds"]["n_topics"] == PARAMS["n_topics"]


def test_bad_comments_do_not_break_the_topic_model():
    bad = ["", "😀😀😀", "<script>alert(1)</script>", "Sehr schönes Bild, die Farben gefallen mir.",
           "The light on the old stone bridge is lovely. " * 24000]  # over 1 MB: read up to topics.MAX_CHARS
    rows = theme_rows() + [{"caption_id": 100 + i, "image_id": 100 + i, "text": t} for i, t in enumerate(bad)]
    decisions = topics.LdaTopics(PARAMS).decide_run(rows)
    assert len(decisions) == len(rows)


def test_the_model_saves_and_loads_and_infers_new_images(fitted):
    flt, _ = fitted
    loaded = topics.model_from_bytes(topics.model_to_bytes(flt.model))
    assert loaded.vocabulary == flt.model.vocabulary
    assert topics.topic_words(loaded, 5) == topics.topic_words(flt.model, 5)
    water_topic = int(np.argmax(flt.distributions[1]))
    new = loaded.infer([["reflection", "lake", "water", "calm water"], ["tower", "roof", "church"], []])
    assert int(new[0].argmax()) == water_topic and int(new[1].argmax()) != water_topic
    assert new[2].sum() == 0


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="max_doc_freq"):
        topics.LdaTopics({"max_doc_freq": 0})
    with pytest.raises(ValueError, match="unknown"):
        topics.LdaTopics({"topics": 5})
    cls = registry.get("lda_topics")
    assert cls.run_level and cls.defaults["n_topics"] == 200 and cls.defaults["max_doc_freq"] == 0.10


@pytest.mark.django_db
def test_saving_a_runs_topics_stores_the_model_and_each_images_distribution(fitted):
    flt, _ = fitted
    collection = Collection.objects.create(name="ava")
    images = {}
    for row in theme_rows():
        image = images.get(row["image_id"]) or Image.objects.create(collection=collection, external_id=str(row["image_id"]))
        images[row["image_id"]] = image
        Caption.objects.create(image=image, text=row["text"], origin=Caption.Origin.WEB_COMMENT)
    run = FilterRun.objects.create(collection=collection)
    # The fixture's rows use image numbers 1..8: map them onto the database's images.
    flt_db = topics.LdaTopics(PARAMS)
    flt_db.decide_run([{**row, "image_id": images[row["image_id"]].pk} for row in theme_rows()])

    artifact = topics.save_run_topics(flt_db, run)
    assert (artifact.filter_name, artifact.version, artifact.collection) == ("lda_topics", 1, collection)
    assert artifact.summary["images_labelled"] == 8 and artifact.summary["run"] == run.pk
    assert ImageTopics.objects.filter(artifact=artifact).count() == 8
    stored = ImageTopics.objects.get(artifact=artifact, image=images[1])
    assert stored.distribution == flt_db.distributions[images[1].pk]
    assert topics.topic_words(artifact, 5) == topics.topic_words(flt_db.model, 5)

    assert topics.save_run_topics(flt_db, run) == artifact  # finalising twice: same artifact, same rows
    assert FilterArtifact.objects.filter(filter_name="lda_topics").count() == 1
    assert ImageTopics.objects.count() == 8

    other = topics.LdaTopics({**PARAMS, "random_state": 8})
    other.decide_run([{**row, "image_id": images[row["image_id"]].pk} for row in theme_rows()])
    assert topics.save_run_topics(other, run).version == 2


@pytest.mark.django_db
def test_alice_sees_an_images_topics_on_its_page_and_in_the_api(alice, alice_client):
    from django.urls import reverse
    from rest_framework.test import APIClient

    collection = Collection.objects.create(name="critiques")
    images = {n: Image.objects.create(collection=collection, external_id=str(n), status="missing")
              for n in sorted({row["image_id"] for row in theme_rows()})}
    run = FilterRun.objects.create(collection=collection)
    flt = topics.LdaTopics(PARAMS)
    flt.decide_run([{**row, "image_id": images[row["image_id"]].pk} for row in theme_rows()])
    artifact = topics.save_run_topics(flt, run)
    water = images[1]
    top = int(np.argmax(flt.distributions[water.pk]))
    words = topics.topic_words(flt.model, topics.TOPIC_WORDS_SHOWN)[top]

    page = alice_client.get(reverse("image-detail", args=[water.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Topics" in html and f"Topic {top}" in html and ", ".join(words[:2]) in html
    assert f"run #{run.pk}" in html

    api = APIClient()
    api.force_authenticate(alice)
    detail = api.get(f"/api/images/{water.pk}/").json()
    [model] = detail["topics"]
    assert (model["artifact"], model["run"], model["n_topics"]) == (artifact.pk, run.pk, 2)
    assert model["top"][0]["topic"] == top and model["top"][0]["words"] == words
    assert model["distribution"] == pytest.approx(flt.distributions[water.pk])
    listed = {row["id"]: row for row in api.get("/api/images/", {"collection": collection.pk}).json()["results"]}
    assert listed[water.pk]["topics"][0]["top"][0]["topic"] == top
    assert "distribution" not in listed[water.pk]["topics"][0]


@pytest.mark.django_db
def test_an_image_without_topics_shows_none_and_a_missing_model_file_does_not_break_the_page(alice, alice_client):
    from django.urls import reverse

    collection = Collection.objects.create(name="no topics yet")
    image = Image.objects.create(collection=collection, external_id="x", status="missing")
    page = alice_client.get(reverse("image-detail", args=[image.pk]))
    assert page.status_code == 200 and "topics-heading" not in page.content.decode()
    artifact = topics.artifact_create("lda_topics", b"not an npz", extension="npz", collection=collection)
    ImageTopics.objects.create(image=image, artifact=artifact, distribution=[0.25, 0.75])
    page = alice_client.get(reverse("image-detail", args=[image.pk]))
    assert page.status_code == 200 and "Topic 1" in page.content.decode()
