"""Search by meaning (pack.embeddings.search): captions by words and meaning with the packaged sentence
encoder (real weights) over captions written here, captions like a caption, images like an image and text to
images with the tiny random-weight CLIP; and the clear errors when no model is registered or nothing was
embedded yet."""
import pytest

from pack import PackError
from pack.embeddings import search
from tests.curation.search_helpers import caption_collection, captions_of, embed_images

pytestmark = pytest.mark.django_db


def _by_text(results):
    return {hit.text: hit for hit in results.rows}


def test_a_paraphrase_is_found_by_meaning_though_it_shares_no_word_with_the_query(embedded, minilm):
    results = search.search_captions(embedded, "a puppy at the seaside", k=8)

    top_two = {hit.text for hit in results.rows[:2]}
    assert top_two == {"a dog runs on the beach", "a puppy is running along the seashore"}
    dog = _by_text(results)["a dog runs on the beach"]
    assert dog.why == ["meaning"] and dog.text_rank is None and dog.meaning > 0.3
    assert results.model == minilm.key and results.notes == []


def test_a_caption_found_by_its_words_and_its_meaning_ranks_first_and_says_both(embedded):
    results = search.search_captions(embedded, "automobile", k=8)

    first = results.rows[0]
    assert first.text == "an automobile parked beside an office block"
    assert first.why == ["text match", "meaning"] and first.text_rank > 0 and first.meaning is not None
    assert results.rows[1].text == "a red car parked near a building"  # the same meaning, other words


def test_full_text_search_stems_words_in_the_collections_language(embedded):
    results = search.search_captions(embedded, "parks", k=8)

    matched = {hit.text for hit in results.rows if "text match" in hit.why}
    assert matched == {"a red car parked near a building", "an automobile parked beside an office block",
                       "children play football in a park"}  # park, parked, parks: one stem


def test_words_alone_answer_and_say_why_when_the_collection_has_no_caption_embeddings(minilm):
    collection = caption_collection("Not embedded")

    results = search.search_captions(collection, "beach")

    assert [hit.text for hit in results.rows] == ["a dog runs on the beach"]
    assert results.rows[0].why == ["text match"] and results.model == ""
    assert len(results.notes) == 1 and "No embeddings yet" in results.notes[0] and "Embed" in results.notes[0]


def test_captions_like_a_caption_finds_its_paraphrase_and_leaves_itself_out(embedded):
    pasta = next(c for c in captions_of(embedded) if c.text.startswith("a plate of pasta"))

    results = search.captions_like(pasta, k=3)

    assert results.rows[0].text == "a bowl of noodles served on a kitchen table"
    assert pasta.pk not in [hit.id for hit in results.rows] and len(results.rows) == 3
    assert [hit.score for hit in results.rows] == sorted((hit.score for hit in results.rows), reverse=True)


def test_captions_like_says_no_embeddings_yet_when_the_collection_was_not_embedded(minilm):
    caption = captions_of(caption_collection("Fresh"))[0]

    with pytest.raises(PackError) as caught:
        search.captions_like(caption)

    assert caught.value.code == "no_embeddings"
    assert "No embeddings yet" in caught.value.message and "manage.py embed" in caught.value.message


def test_images_like_says_no_model_registered_when_there_is_no_clip_model(models_dir):
    image = caption_collection("No model").images.first()

    with pytest.raises(PackError) as caught:
        search.images_like(image)

    assert caught.value.code == "no_model"
    assert "No image-text (CLIP-family) model is registered" in caught.value.message
    assert "manage.py models add-pretrained" in caught.value.message


def test_images_like_finds_an_exact_copy_first_and_leaves_the_image_itself_out(tiny_clip):
    collection = caption_collection("With a copy", copies=1)
    embed_images(collection, tiny_clip)
    original = collection.images.get(external_id="img-0")
    copy = collection.images.get(external_id="copy-0")

    results = search.images_like(original, k=5)

    assert results.rows[0].id == copy.pk and results.rows[0].score == pytest.approx(1.0, abs=1e-4)
    assert original.pk not in [hit.id for hit in results.rows] and len(results.rows) == 5
    assert results.rows[0].text == "the same photo again (0)" and results.model == tiny_clip.key


def test_images_like_an_image_whose_vector_is_not_stored_says_to_run_embed(tiny_clip):
    image = caption_collection("Not embedded yet").images.first()

    with pytest.raises(PackError) as caught:
        search.images_like(image)

    assert caught.value.code == "no_embeddings" and "run Embed" in caught.value.message


def test_text_to_images_ranks_every_embedded_image_by_the_clip_text_tower(tiny_clip):
    collection = caption_collection("Text to images")
    embed_images(collection, tiny_clip)

    results = search.text_to_images(collection, "a dog runs on the beach", k=50)

    assert len(results.rows) == collection.images.count()
    assert [hit.score for hit in results.rows] == sorted((hit.score for hit in results.rows), reverse=True)
    assert all(hit.kind == "image" and hit.why == ["meaning"] and -1 <= hit.score <= 1 for hit in results.rows)


def test_text_to_images_on_a_collection_without_image_vectors_says_no_embeddings_yet(tiny_clip):
    with pytest.raises(PackError) as caught:
        search.text_to_images(caption_collection("Empty of vectors"), "a dog")

    assert caught.value.code == "no_embeddings" and "images of collection" in caught.value.message


def test_a_search_naming_a_model_that_is_not_registered_is_refused(embedded):
    with pytest.raises(PackError) as caught:
        search.search_captions(embedded, "dog", model="no-such-model")

    assert caught.value.code == "no_model" and "'no-such-model'" in caught.value.message


def test_searching_images_with_a_text_encoder_is_refused_as_the_wrong_kind(embedded, minilm):
    with pytest.raises(PackError) as caught:
        search.text_to_images(embedded, "dog", model=minilm.name)

    assert caught.value.code == "wrong_kind"


@pytest.mark.parametrize("query", ["", "   ", "x" * 501])
def test_an_empty_or_overlong_query_is_refused(embedded, query):
    with pytest.raises(PackError) as caught:
        search.search_captions(embedded, query)

    assert caught.value.code == "invalid" and caught.value.field == "q"


def test_k_must_be_a_number(embedded):
    with pytest.raises(PackError) as caught:
        search.search_captions(embedded, "dog", k="many")

    assert caught.value.field == "k"
