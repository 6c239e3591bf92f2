"""lda_topics in bounded memory: one streamed pass over the run (prepare_run) fits the model, on a seeded sample
of at most fit_sample images, then each batch of images is labelled (decide_run), as the executor calls it."""
import numpy as np
import pytest

from curation.pipeline import topics
from curation.pipeline.base import KEEP
from curation.pipeline.topics_corpus import image_batches

from .test_topics import PARAMS, theme_rows


def decided_in_batches(flt, rows, size):
    """prepare_run over the rows ordered by image, then decide_run a batch of about ``size`` rows at a time."""
    ordered = sorted(rows, key=lambda row: (row["image_id"], row["caption_id"]))
    flt.prepare_run(iter(ordered))
    decisions, distributions = {}, {}
    for batch in image_batches(ordered, size):
        decisions.update(flt.decide_run([row for image in batch for row in image]))
        distributions.update(flt.distributions)
    return decisions, distributions


def test_a_run_decided_batch_by_batch_gets_the_topics_of_the_whole_run_in_one_call():
    whole = topics.LdaTopics(PARAMS)
    at_once = whole.decide_run(theme_rows(n_images=12))
    streamed = topics.LdaTopics(PARAMS)
    decisions, distributions = decided_in_batches(streamed, theme_rows(n_images=12), 5)
    assert decisions == at_once and distributions == whole.distributions
    assert topics.model_to_bytes(streamed.model) == topics.model_to_bytes(whole.model)
    assert streamed.images_labelled == 12 and "fit_sample" not in streamed.model.meta


def test_a_run_larger_than_the_fit_sample_is_fitted_on_a_sample_and_every_image_labelled():
    params = {**PARAMS, "fit_sample": 12}
    flt = topics.LdaTopics(params)
    decisions, distributions = decided_in_batches(flt, theme_rows(n_images=40), 7)
    meta = flt.model.meta
    assert meta["fit_sample"] == {"images": 12} and meta["images_labelled"] == 12
    assert (meta["images"], meta["comments"]) == (40, 120)  # the vocabulary's counts are the whole run's
    assert len(decisions) == 120 and all(d.outcome == KEEP for d in decisions.values())
    assert sorted(distributions) == list(range(1, 41)) and flt.images_labelled == 40
    water = {int(np.argmax(distributions[i])) for i in range(1, 41, 2)}
    building = {int(np.argmax(distributions[i])) for i in range(2, 41, 2)}
    assert len(water) == len(building) == 1 and water != building

    # The same images are sampled whatever order the rows come in: same model, byte for byte.
    again = topics.LdaTopics(params)
    again.decide_run(list(reversed(theme_rows(n_images=40))))
    assert topics.model_to_bytes(again.model) == topics.model_to_bytes(flt.model)
    assert again.distributions == distributions


def test_rows_out_of_image_order_are_refused_rather_than_split_into_two_documents():
    rows = theme_rows()
    with pytest.raises(ValueError, match="ordered by image"):
        topics.LdaTopics(PARAMS).prepare_run(iter(rows[3:] + rows[:3]))


def test_the_fit_sample_is_checked():
    with pytest.raises(ValueError, match="fit_sample"):
        topics.LdaTopics({"fit_sample": -1})
    assert topics.LdaTopics({"fit_sample": None}).params["fit_sample"] is None
