"""Search by meaning, duplicate clusters and alignment cut-offs as a curator meets them: the collection's
search page, the "like this" pages, the API, ``manage.py search``, the cluster page with keep-one / keep-all,
and the alignment step's histogram. A missing model or missing embeddings is a clear message, never a 500."""
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from curation.models import FilterDecision, FilterRun, Review
from tests.curation.search_helpers import caption_collection, captions_of, cluster_run, embed_images

pytestmark = pytest.mark.django_db


def _caption(collection, start: str):
    return next(c for c in captions_of(collection) if c.text.startswith(start))


# --- Pages -----------------------------------------------------------------------------------------


def test_the_collection_page_links_to_its_search_page(alice_client, embedded):
    page = alice_client.get(embedded.get_absolute_url()).content.decode()

    assert reverse("collection-search", args=[embedded.pk]) in page


def test_the_search_page_shows_captions_found_by_words_and_by_meaning(alice_client, embedded):
    response = alice_client.get(reverse("collection-search", args=[embedded.pk]), {"q": "automobile"})

    page = response.content.decode()
    assert response.status_code == 200
    assert page.index("an automobile parked beside an office block") < page.index("a red car parked near a building")
    assert "text match" in page and "meaning" in page and "captions like this" in page


def test_htmx_gets_only_the_results(alice_client, embedded):
    response = alice_client.get(reverse("collection-search", args=[embedded.pk]), {"q": "dog"}, HTTP_HX_REQUEST="true")

    page = response.content.decode()
    assert response.status_code == 200 and page.lstrip().startswith("<section id=\"search-results\"")
    assert "a dog runs on the beach" in page


def test_searching_images_with_no_clip_model_says_no_model_registered_not_a_500(alice_client, embedded):
    response = alice_client.get(reverse("collection-search", args=[embedded.pk]), {"q": "dog", "mode": "images"})

    page = response.content.decode()
    assert response.status_code == 409
    assert "No model registered" in page and "manage.py models add-pretrained" in page


def test_images_like_this_before_embedding_says_no_embeddings_yet(alice_client, tiny_clip):
    image = caption_collection("Not embedded").images.first()

    response = alice_client.get(reverse("image-like", args=[image.pk]))

    assert response.status_code == 409
    assert "No embeddings yet" in response.content.decode() and "run Embed" in response.content.decode()


def test_captions_like_this_page_lists_the_paraphrase_first(alice_client, embedded):
    pasta = _caption(embedded, "a plate of pasta")

    page = alice_client.get(reverse("caption-like", args=[pasta.pk])).content.decode()

    assert "Captions like this" in page
    results = page[page.index('id="search-results"'):]
    assert results.index("a bowl of noodles served on a kitchen table") < results.index("a dog runs on the beach")


def test_images_like_this_page_shows_the_copy_with_a_cosine_of_one(alice_client, tiny_clip):
    collection = caption_collection("Copies", copies=1)
    embed_images(collection, tiny_clip)
    original = collection.images.get(external_id="img-0")
    copy = collection.images.get(external_id="copy-0")

    page = alice_client.get(reverse("image-like", args=[original.pk])).content.decode()

    results = page[page.index('id="search-results"'):]
    assert results.index(f'data-image="{copy.pk}"') < results.index('data-image=') + 1 and "1.000" in results


def test_the_image_page_links_to_images_and_captions_like_it(alice_client, embedded):
    caption = captions_of(embedded)[0]

    page = alice_client.get(reverse("image-detail", args=[caption.image_id])).content.decode()

    assert reverse("image-like", args=[caption.image_id]) in page and reverse("caption-like", args=[caption.pk]) in page


def test_an_annotator_cannot_search(client, bob, embedded):
    client.force_login(bob)

    assert client.get(reverse("collection-search", args=[embedded.pk]), {"q": "dog"}).status_code == 403
    assert client.get(reverse("api-collection-search", args=[embedded.pk]), {"q": "dog"}).status_code == 403


# --- API -------------------------------------------------------------------------------------------


def test_the_api_searches_captions_with_scores_and_why(alice_client, embedded, minilm):
    response = alice_client.get(reverse("api-collection-search", args=[embedded.pk]), {"q": "automobile", "k": 3})

    body = response.json()
    assert response.status_code == 200 and body["model"] == minilm.key and body["count"] == 3
    assert body["results"][0]["text"] == "an automobile parked beside an office block"
    assert body["results"][0]["why"] == ["text match", "meaning"] and body["results"][0]["kind"] == "caption"


def test_the_api_finds_similar_captions_and_images(alice_client, embedded, tiny_clip):
    embed_images(embedded, tiny_clip)
    pasta = _caption(embedded, "a plate of pasta")

    captions = alice_client.get(reverse("api-caption-similar", args=[pasta.pk]), {"k": 2}).json()
    images = alice_client.get(reverse("api-image-similar", args=[pasta.image_id]), {"k": 4}).json()

    assert captions["results"][0]["text"] == "a bowl of noodles served on a kitchen table" and captions["count"] == 2
    assert images["count"] == 4 and pasta.image_id not in [hit["id"] for hit in images["results"]]


def test_the_api_says_no_model_registered_with_409_and_a_code(alice_client, embedded):
    image = embedded.images.first()

    response = alice_client.get(reverse("api-image-similar", args=[image.pk]))

    assert response.status_code == 409
    assert response.json()["code"] == "no_model" and "is registered" in response.json()["detail"]


def test_the_api_says_no_embeddings_yet_with_409(alice_client, minilm):
    caption = captions_of(caption_collection("Fresh"))[0]

    response = alice_client.get(reverse("api-caption-similar", args=[caption.pk]))

    assert response.status_code == 409 and response.json()["code"] == "no_embeddings"


@pytest.mark.parametrize("params", [{"q": ""}, {"q": "dog", "mode": "sounds"}, {"q": "dog", "k": "lots"},
                                    {"q": "dog", "colour": "red"}])
def test_the_api_refuses_a_bad_search_with_400(alice_client, embedded, params):
    response = alice_client.get(reverse("api-collection-search", args=[embedded.pk]), params)

    assert response.status_code == 400 and "detail" in response.json()


def test_the_api_answers_404_for_a_collection_that_is_not_there(alice_client, minilm):
    assert alice_client.get(reverse("api-collection-search", args=[999999]), {"q": "dog"}).status_code == 404


# --- Duplicate clusters ----------------------------------------------------------------------------


@pytest.fixture
def clustered(embedded, alice):
    captions = captions_of(embedded)
    run = cluster_run(embedded, [[captions[0], captions[1]], [captions[4], captions[5]]], user=alice)
    return run, captions


def _finals(run, captions) -> dict[int, str]:
    return {d.caption_id: d.final_outcome for d in FilterDecision.objects.filter(run=run, caption__in=captions)}


def test_the_step_page_of_a_duplicates_step_links_to_its_clusters(alice_client, clustered):
    run, _ = clustered

    page = alice_client.get(reverse("run-step", args=[run.pk, 0])).content.decode()

    assert reverse("run-step-clusters", args=[run.pk, 0]) in page and "Review duplicate clusters" in page


def test_the_cluster_page_shows_each_cluster_as_a_group_with_the_filters_choice_first(alice_client, clustered):
    run, captions = clustered

    page = alice_client.get(reverse("run-step-clusters", args=[run.pk, 0])).content.decode()

    assert page.count('class="card cluster ') == 2
    group = page[page.index(f'id="cluster-{captions[0].pk}"'):page.index(f'id="cluster-{captions[4].pk}"')]
    assert group.index("a dog runs on the beach") < group.index("a puppy is running along the seashore")
    assert "filter’s choice" in group and "Keep all" in group and "Keep only this" in group


def test_keep_one_keeps_the_chosen_caption_and_drops_the_rest_as_overrides(alice_client, clustered, alice):
    run, captions = clustered
    dog, puppy = captions[0], captions[1]

    response = alice_client.post(reverse("run-step-cluster-keep", args=[run.pk, 0, dog.pk]),
                                 {"keep": "one", "member": puppy.pk}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and 'data-state="one"' in response.content.decode()
    assert _finals(run, [dog, puppy]) == {dog.pk: "drop", puppy.pk: "keep"}
    assert Review.objects.filter(decision__run=run, user=alice).count() == 2
    run.refresh_from_db()
    assert run.funnel and run.funnel[0]["dropped"] == 2  # the dog's caption and the noodles'


def test_keep_all_through_the_api_keeps_every_member(alice_client, clustered):
    run, captions = clustered
    pasta, noodles = captions[4], captions[5]

    response = alice_client.post(reverse("api-cluster-keep", args=[run.pk, 0, pasta.pk]), {"keep": "all"},
                                 content_type="application/json")

    assert response.status_code == 200 and response.json()["state"] == "all"
    assert _finals(run, [pasta, noodles]) == {pasta.pk: "keep", noodles.pk: "keep"}
    assert FilterDecision.objects.get(run=run, caption=noodles).override == "keep"


def test_keep_one_through_the_api_defaults_to_the_filters_choice(alice_client, clustered):
    run, captions = clustered
    alice_client.post(reverse("api-cluster-keep", args=[run.pk, 0, captions[4].pk]), {"keep": "all"},
                      content_type="application/json")

    response = alice_client.post(reverse("api-cluster-keep", args=[run.pk, 0, captions[4].pk]), {"keep": "one"},
                                 content_type="application/json")

    assert response.json()["kept"] == [captions[4].pk]
    assert _finals(run, captions[4:6]) == {captions[4].pk: "keep", captions[5].pk: "drop"}


def test_cluster_keep_refuses_what_is_not_there_or_not_a_member(alice_client, clustered):
    run, captions = clustered
    url = reverse("api-cluster-keep", args=[run.pk, 0, captions[0].pk])

    outsider = alice_client.post(url, {"keep": "one", "caption_id": captions[7].pk}, content_type="application/json")
    no_cluster = alice_client.post(reverse("api-cluster-keep", args=[run.pk, 0, 999999]), {"keep": "all"},
                                   content_type="application/json")
    no_step = alice_client.post(reverse("api-cluster-keep", args=[run.pk, 5, captions[0].pk]), {"keep": "all"},
                                content_type="application/json")
    bad_choice = alice_client.post(url, {"keep": "some"}, content_type="application/json")

    assert outsider.status_code == 400 and "is not a member" in outsider.json()["detail"]
    assert no_cluster.status_code == 404 and no_step.status_code == 404 and bad_choice.status_code == 400
    assert not Review.objects.filter(decision__run=run).exists()


# --- The alignment step's histogram ----------------------------------------------------------------


def test_the_alignment_histogram_draws_the_top_percent_and_calibrated_cut_offs_beside_the_threshold(alice_client,
                                                                                                  embedded):
    snapshot = [{"filter": "alignment", "version": 1, "label": "Image-text alignment (CLIP score)", "target": "caption",
                 "params": {"mode": "top_percent", "min_score": 0.2, "top_percent": 30.0, "target_precision": 0.9,
                            "min_judged": 30, "model": ""}, "transform": False, "run_level": True, "enabled": True}]
    run = FilterRun.objects.create(collection=embedded, snapshot=snapshot, status=FilterRun.Status.DONE)
    cutoffs = {"threshold": 0.2, "top_percent": 0.31, "calibrated": 0.26}
    FilterDecision.objects.bulk_create([
        FilterDecision(run=run, step=0, filter_name="alignment", image_id=c.image_id, caption=c, score=0.15 + 0.03 * i,
                       outcome="keep" if 0.15 + 0.03 * i >= 0.31 else "drop", reason="",
                       details={"model": "tiny@x", "mode": "top_percent", "cutoff": 0.31, "cutoffs": cutoffs})
        for i, c in enumerate(captions_of(embedded))])

    page = alice_client.get(reverse("run-step", args=[run.pk, 0])).content.decode()

    assert 'class="threshold" data-name="min_score" data-value="0.2"' in page
    assert 'class="cutoff" data-name="top 30%" data-value="0.31"' in page
    assert 'class="cutoff" data-name="calibrated" data-value="0.26"' in page
    assert "top 30% = 0.31" in page and "calibrated = 0.26" in page


def test_other_steps_draw_no_cut_offs(alice_client, clustered):
    run, _ = clustered

    page = alice_client.get(reverse("run-step", args=[run.pk, 0])).content.decode()

    assert 'class="cutoff"' not in page


def test_decision_rows_link_to_images_and_captions_like_them(alice_client, clustered):
    run, captions = clustered

    page = alice_client.get(reverse("run-step", args=[run.pk, 0]), {"tab": "drop"}).content.decode()

    assert reverse("caption-like", args=[captions[1].pk]) in page
    assert reverse("image-like", args=[captions[1].image_id]) in page


# --- manage.py search ------------------------------------------------------------------------------


def test_the_search_command_prints_ranked_captions_with_why(embedded, capsys):
    call_command("search", str(embedded.pk), "automobile", "--k", "2")

    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("  1. ")
    assert "an automobile parked beside an office block" in lines[0] and "[text match, meaning]" in lines[0]


def test_the_search_command_finds_captions_and_images_like_one(embedded, tiny_clip, capsys):
    embed_images(embedded, tiny_clip)
    pasta = _caption(embedded, "a plate of pasta")

    call_command("search", str(embedded.pk), "--like-caption", str(pasta.pk), "--k", "1")
    call_command("search", str(embedded.pk), "--like-image", str(pasta.image_id), "--k", "3")
    call_command("search", str(embedded.pk), "a dog", "--images", "--k", "2")

    lines = capsys.readouterr().out.splitlines()
    assert "a bowl of noodles served on a kitchen table" in lines[0]
    assert len(lines) == 6 and all(" image " in line for line in lines[1:])


def test_the_search_command_says_what_to_do_when_nothing_is_embedded(minilm):
    collection = caption_collection("Fresh")
    caption = captions_of(collection)[0]

    with pytest.raises(CommandError, match="No embeddings yet.*manage.py embed"):
        call_command("search", str(collection.pk), "--like-caption", str(caption.pk))
    with pytest.raises(CommandError, match="No image-text"):
        call_command("search", str(collection.pk), "dog", "--images")


def test_the_search_api_results_are_json_serialisable_in_full(alice_client, embedded):
    body = alice_client.get(reverse("api-collection-search", args=[embedded.pk]), {"q": "a puppy"}).json()

    assert json.loads(json.dumps(body)) == body and {"query", "model", "notes", "count", "results"} <= set(body)
