"""A release's card names the model-pack models its filter run decided with, and their licences."""
from curation.models import FilterDecision
from releases.card import provenance_summary

from .release_helpers import add_caption, cc_collection, finished_run


def test_the_card_names_the_pretrained_model_and_its_licence(tiny_clip):
    collection, images = cc_collection(n_images=2)
    caption = add_caption(images[0], "a dog runs on the beach")
    steps = [{"filter": "caption_length", "version": 1, "label": "Caption length", "params": {}},
             {"filter": "alignment", "version": 1, "label": "Image-text alignment", "params": {}}]
    run = finished_run(collection, steps)
    FilterDecision.objects.create(run=run, step=1, filter_name="alignment", image=images[0], caption=caption,
                                  outcome="keep", score=0.31, details={"model": tiny_clip.key})
    text = "\n".join(provenance_summary({"run": run.pk}))
    assert f"`{tiny_clip.key}` (steps 2; licence MIT \\(random test weights\\))" in text


def test_a_run_without_model_steps_names_no_pretrained_model(db):
    collection, _ = cc_collection(n_images=1)
    run = finished_run(collection)
    assert "Pretrained models" not in "\n".join(provenance_summary({"run": run.pk}))
