"""Image-text alignment: with stored vectors of known cosines (the tiny CLIP's own scores mean nothing), the
three ways to decide (a threshold, the run's top k%, a cut-off calibrated on what the crowd and a curator
judged), every cut-off and the model key recorded for the histogram; then the tiny CLIP end to end on the real
photos through the executor, an undecodable photo reported while the run goes on, and no model registered."""
import hashlib

import numpy as np
import pytest
from django.core.files.base import ContentFile

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, Review, RunChunk
from curation.pipeline import executor
from curation.pipeline.alignment import Alignment
from curation.pipeline.base import DROP, KEEP, NA
from curation.pipeline.executor import PipelineError, validate_steps
from curation.services import run_create
from pack.embeddings.store import text_sha256, to_bytes
from pack.models import ImageEmbedding, TextEmbedding

pytestmark = pytest.mark.django_db


def unit(dim: int, axis: int) -> np.ndarray:
    vector = np.zeros(dim, dtype=np.float32)
    vector[axis] = 1.0
    return vector


def planted(model, scores: list[float]) -> tuple[Collection, list[dict]]:
    """One image and one caption per score, with stored vectors whose cosine is that score."""
    collection = Collection.objects.create(name=f"planted {len(scores)}")
    dim = model.embedding_dim
    rows = []
    for i, score in enumerate(scores):
        image = Image.objects.create(collection=collection, external_id=f"i{i}", sha256=hashlib.sha256(b"%d" % i).hexdigest())
        text = f"caption number {i}"
        caption = Caption.objects.create(image=image, text=text, origin="alt_text")
        ImageEmbedding.objects.create(model=model, image=image, collection=collection, dim=dim, vector=to_bytes(unit(dim, 0)))
        vector = score * unit(dim, 0) + np.sqrt(1 - score ** 2) * unit(dim, 1)
        TextEmbedding.objects.create(encoder=model.key, text_sha256=text_sha256(text), dim=dim, vector=to_bytes(vector))
        rows.append({"caption_id": caption.pk, "image_id": image.pk, "text": text, "score": score})
    return collection, rows


def crowd_judges(collection, rows, good) -> None:
    """A finished GOOD/BAD quality campaign whose aggregated label is ``good(row)`` for each row."""
    from annotation.models import Aggregate, Campaign, Task

    campaign = Campaign.objects.create(name=f"quality of {collection.name}", kind="quality", collection=collection)
    for row in rows:
        task = Task.objects.create(campaign=campaign, image_id=row["image_id"], caption_id=row["caption_id"])
        Aggregate.objects.create(task=task, part="", method="majority", label="good" if good(row) else "bad", n_votes=3)


def test_the_threshold_mode_keeps_scores_at_or_above_min_score_and_records_the_cutoffs(tiny_clip):
    _, rows = planted(tiny_clip, [0.1, 0.2, 0.28, 0.3, 0.6])
    decisions = Alignment({"min_score": 0.28}).decide_run(rows)
    outcomes = [decisions[row["caption_id"]].outcome for row in rows]
    assert outcomes == [DROP, DROP, KEEP, KEEP, KEEP]
    dropped = decisions[rows[0]["caption_id"]]
    assert dropped.reason == "below_threshold" and dropped.score == pytest.approx(0.1, abs=1e-3)
    assert dropped.details["model"] == tiny_clip.key and dropped.details["cutoff"] == 0.28
    assert set(dropped.details["cutoffs"]) == {"threshold", "top_percent", "calibrated"}
    assert dropped.details["cutoffs"]["top_percent"] == pytest.approx(0.3, abs=1e-3)  # 30% of 5, rounded up: 2 kept
    assert Alignment.score_thresholds == ("min_score",)


def test_the_top_percent_mode_keeps_the_best_captions_of_the_run(tiny_clip):
    _, rows = planted(tiny_clip, [round(0.05 * k, 2) for k in range(1, 11)])
    decisions = Alignment({"mode": "top_percent", "top_percent": 30}).decide_run(rows)
    kept = sorted(row["score"] for row in rows if decisions[row["caption_id"]].outcome == KEEP)
    assert kept == [0.4, 0.45, 0.5]
    low = decisions[rows[0]["caption_id"]]
    assert low.reason == "below_top_percent" and low.details["cutoff"] == pytest.approx(0.4, abs=1e-3)


def test_the_calibrated_mode_finds_the_cutoff_that_reaches_the_target_precision_on_crowd_judgements(tiny_clip):
    scores = [round(0.02 * k, 2) for k in range(1, 41)]  # 0.02 .. 0.80
    collection, rows = planted(tiny_clip, scores)
    # The crowd calls a caption good from 0.40 on, with two bad ones above and one good one below.
    noisy = {0.46: False, 0.62: False, 0.2: True}
    crowd_judges(collection, rows, lambda row: noisy.get(row["score"], row["score"] >= 0.4))
    decisions = Alignment({"mode": "calibrated", "target_precision": 0.9, "min_judged": 20}).decide_run(rows)
    details = decisions[rows[0]["caption_id"]].details
    cutoff = details["cutoffs"]["calibrated"]
    assert 0.3 <= cutoff <= 0.42 and details["cutoff"] == cutoff
    assert details["calibration"]["judged"] == 40 and details["calibration"]["precision"] >= 0.9
    kept = [row for row in rows if decisions[row["caption_id"]].outcome == KEEP]
    assert all(row["score"] >= cutoff for row in kept) and len(kept) >= 19
    assert decisions[rows[0]["caption_id"]].reason == "below_calibrated"


def test_a_curators_review_of_an_alignment_decision_overrules_the_crowd(tiny_clip):
    from curation.pipeline.alignment import judgements

    collection, rows = planted(tiny_clip, [0.2, 0.5])
    crowd_judges(collection, rows, lambda row: True)
    run = FilterRun.objects.create(collection=collection, snapshot=[])
    decision = FilterDecision.objects.create(run=run, step=0, image_id=rows[0]["image_id"],
                                             caption_id=rows[0]["caption_id"], filter_name="alignment", outcome=KEEP)
    Review.objects.create(decision=decision, outcome=DROP)
    assert judgements([row["caption_id"] for row in rows]) == {rows[0]["caption_id"]: False, rows[1]["caption_id"]: True}


def test_with_too_few_judgements_the_calibrated_mode_says_so_and_falls_back_to_the_threshold(tiny_clip):
    collection, rows = planted(tiny_clip, [0.1, 0.3, 0.5, 0.7])
    crowd_judges(collection, rows[:3], lambda row: row["score"] > 0.2)
    decisions = Alignment({"mode": "calibrated", "min_score": 0.4, "min_judged": 30}).decide_run(rows)
    details = decisions[rows[0]["caption_id"]].details
    assert details["cutoffs"]["calibrated"] is None and details["cutoff"] == 0.4
    assert "too few judged captions" in details["calibration"]["note"] and "3 judged" in details["calibration"]["note"]
    assert [decisions[r["caption_id"]].outcome for r in rows] == [DROP, DROP, KEEP, KEEP]
    assert decisions[rows[0]["caption_id"]].reason == "below_threshold"


def test_the_tiny_clip_scores_real_photos_through_the_executor_and_an_undecodable_one_is_not_applicable(
        tiny_clip, shared_photos):
    collection = Collection.objects.create(name="aligned photos")
    for i, path in enumerate(sorted(shared_photos.glob("*.jpg"))[:3] + [None]):
        data = path.read_bytes() if path else b"\xff\xd8\xff\xe0 cut short"
        image = Image(collection=collection, external_id=f"a{i}", sha256=hashlib.sha256(data).hexdigest(), format="JPEG")
        image.file.save(f"a{i}.jpg", ContentFile(data), save=False)
        image.save()
        Caption.objects.create(image=image, text=["a dog runs on the beach", "a plate of food on a table"][i % 2],
                               origin="alt_text")
    pipeline = Pipeline.objects.create(name="align", steps=[{"filter": "alignment", "params": {"min_score": -1}}])
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda *a: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    assert run.status == FilterRun.Status.DONE, run.error
    decisions = list(FilterDecision.objects.filter(run=run, filter_name="alignment").order_by("image_id"))
    assert [d.outcome for d in decisions] == [KEEP, KEEP, KEEP, NA]
    assert all(-1 <= d.score <= 1 and d.details["model"] == tiny_clip.key for d in decisions[:3])
    assert decisions[3].reason == "undecodable" and "decode" in decisions[3].details["error"]


def test_without_a_registered_model_every_caption_is_not_applicable(models_dir):
    collection = Collection.objects.create(name="no model")
    image = Image.objects.create(collection=collection, external_id="x")
    caption = Caption.objects.create(image=image, text="a dog", origin="alt_text")
    decision = Alignment().decide_run([{"caption_id": caption.pk, "image_id": image.pk, "text": "a dog"}])[caption.pk]
    assert (decision.outcome, decision.reason) == (NA, "no_model_registered")
    assert decision.details["note"] == "not run: no model registered"


@pytest.mark.parametrize("params", [{"mode": "best"}, {"top_percent": 0}, {"target_precision": 1.5},
                                    {"min_score": "0.3"}, {"min_judged": 1}])
def test_a_bad_parameter_is_refused_when_the_pipeline_is_saved(params):
    with pytest.raises(PipelineError, match=next(iter(params))):
        validate_steps([{"filter": "alignment", "params": params}])
