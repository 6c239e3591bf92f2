"""Image-text alignment: the cosine similarity of a caption and its image under a registered CLIP-family model
(the "CLIP score" every modern caption-data pipeline filters on), decided one of three ways (``mode``):

- "threshold": keep captions scoring at least ``min_score`` (0.28 is LAION-400M's cut for OpenAI's ViT-B/32;
  cosines of other models sit elsewhere: read the step's histogram);
- "top_percent": keep the best ``top_percent`` % of the run's captions (DataComp's best CLIP filter at 128M
  samples kept the top 30%; at its smallest pool, filtering that hard hurt);
- "calibrated": the lowest cut-off whose kept set reaches ``target_precision`` on the captions a curator
  (reviews of earlier alignment decisions) or the crowd (quality / good-common-bad campaigns, registered by
  annotation in ``curation.extensions``) judged, found by the threshold search of ``thresholds`` (which
  annotation.filter_vs_human shares). With fewer than ``min_judged`` judged captions among the run's, or no
  cut-off reaching the precision, the decision says so and falls back to ``min_score``.

It is a run-level step (top-k% and calibration need every caption's score); over a run it scores the survivors
batch by batch and keeps 12 bytes a caption (id and score) until the cut-offs are known. Each decision records the model
key and every cut-off that is known (``cutoffs``), so the review page can draw them on the score histogram.
"""
from __future__ import annotations

import math
from array import array

import numpy as np

from . import model_steps
from .base import Decision, Filter, Item, drop, keep, not_applicable
from .registry import register

MODES = ("threshold", "top_percent", "calibrated")


def judgements(caption_ids: list[int]) -> dict[int, bool]:
    """{caption id: judged good} for the captions a person judged: the crowd's aggregated label (the sources
    registered in ``curation.extensions.crowd_judgements``: annotation's quality and good/common/bad
    campaigns), overruled by a curator's latest review of an alignment decision on the caption."""
    from ..extensions import crowd_judged
    from ..models import Caption, Review

    wanted = set(caption_ids)
    if not wanted:
        return {}
    ids = sorted(wanted)
    # A run's captions are one collection's: its campaigns hold the crowd's judgements.
    collections = set(Caption.objects.filter(pk=ids[0]).values_list("image__collection_id", flat=True))
    judged = {caption_id: good for caption_id, good in crowd_judged(collections, wanted).items()
              if caption_id in wanted}
    reviews = []
    for start in range(0, len(ids), 5000):
        batch = ids[start:start + 5000]
        reviews += (Review.objects.filter(decision__filter_name="alignment", decision__caption_id__in=batch)
                    .values_list("created_at", "pk", "decision__caption_id", "outcome"))
    for _, _, caption_id, outcome in sorted(reviews):  # the latest review is the curator's word
        judged[caption_id] = outcome == "keep"
    return judged


def top_percent_cutoff(scores: np.ndarray, percent: float) -> float | None:
    """The score of the last caption inside the top ``percent`` % (ties with it are kept too)."""
    if not len(scores):
        return None
    n_keep = max(1, math.ceil(len(scores) * percent / 100.0))
    return float(np.sort(scores)[::-1][min(n_keep, len(scores)) - 1])


def calibrate(scores: dict[int, float], judged: dict[int, bool], precision: float, min_judged: int) -> dict:
    """{"cutoff": float or None, "judged", "positives", "note", and the search's precision/recall when found}."""
    from .thresholds import suggest_threshold

    pairs = [(scores[c], good) for c, good in judged.items() if c in scores]
    found = {"cutoff": None, "judged": len(pairs), "positives": sum(good for _, good in pairs)}
    if len(pairs) < min_judged:
        found["note"] = (f"too few judged captions to calibrate: {len(pairs)} judged among this run's captions, "
                         f"{min_judged} needed; min_score used")
        return found
    best = suggest_threshold([s for s, _ in pairs], [g for _, g in pairs], precision)
    if not best or best["direction"] != ">=":
        found["note"] = (f"no cut-off reaches precision {precision} on the {len(pairs)} judged captions (or better "
                         f"scores are not judged better); min_score used")
        return found
    found.update(cutoff=best["threshold"], precision=best["precision"], recall=best["recall"], auc=best.get("auc"),
                 note=f"calibrated on {len(pairs)} judged captions")
    return found


@register
class Alignment(Filter):
    name = "alignment"
    label = "Image-text alignment (CLIP score)"
    description = ("Cosine similarity of each caption and its image under a registered CLIP-family model. Keeps "
                   "captions at or above min_score, the run's top top_percent %, or a cut-off calibrated on the "
                   "captions a curator or the crowd judged to reach target_precision. Runs over the whole run.")
    run_level = True
    model_kind = "clip"
    defaults = {
        "mode": "threshold",  # "threshold", "top_percent" or "calibrated"
        "min_score": 0.28,  # LAION-400M's cut (ViT-B/32 cosine); also the calibrated mode's fallback
        "top_percent": 30.0,  # DataComp's best CLIP-score filter at 128M samples
        "target_precision": 0.9,  # calibrated: share of kept judged captions that were judged good
        "min_judged": 30,  # calibrated: fewer judged captions than this and min_score is used
        "model": "",  # a registered CLIP-family model's name; "" = the default one
    }
    score_thresholds = ("min_score",)

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        p = self.params
        if p["mode"] not in MODES:
            raise ValueError(f"{self.name}: mode must be one of {', '.join(MODES)}, not {p['mode']!r}")
        for key, low, high in (("min_score", -1, 1), ("top_percent", 0, 100), ("target_precision", 0, 1)):
            value = p[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high \
                    or (key != "min_score" and value == 0):
                raise ValueError(f"{self.name}: {key} must be a number in {'[' if key == 'min_score' else '('}"
                                 f"{low}, {high}], not {value!r}")
        if isinstance(p["min_judged"], bool) or not isinstance(p["min_judged"], int) or p["min_judged"] < 2:
            raise ValueError(f"{self.name}: min_judged must be an integer >= 2")
        if not isinstance(p["model"], str):
            raise ValueError(f"{self.name}: model must be a registered model's name, or '' for the default")

    def apply(self, items: list[Item]) -> list[Decision]:
        """This batch judged alone, as if it were the whole run (previews and tests)."""
        rows = [{"caption_id": it.caption_id, "image_id": it.image_id, "text": it.text} for it in items]
        found = self.decide_run(rows)
        return [found.get(it.caption_id) or not_applicable("no_caption") for it in items]

    # Over a run: one streamed pass scores the survivors batch by batch (``prepare_run``), keeping 12 bytes a
    # caption (its id and score); the cut-offs come from all the scores, then the decisions batch by batch.
    run_shard = "image_id"  # an image's captions in one batch: its vector is computed once
    SCORE_BATCH = 1000

    def prepare_run(self, rows) -> None:
        self._run = _RunScores(self, rows)

    def decide_run(self, rows: list[dict]) -> dict[int, Decision]:
        """The decisions of ``rows``: from the run scored by ``prepare_run``, or (called alone) with these rows as
        the whole run."""
        run = getattr(self, "_run", None) or _RunScores(self, iter(rows))
        return {row["caption_id"]: run.decision(row["caption_id"]) for row in rows}

    def scores(self, model, rows: list[dict]) -> tuple[dict[int, float], dict[int, str]]:
        """({caption id: cosine}, {caption id: why it has none}) for the rows' captions with their images."""
        import pack
        from pack.embeddings import image_vectors, text_vectors

        encoder = pack.load(model)
        vectors, failed = image_vectors(model, sorted({row["image_id"] for row in rows}), encoder=encoder)
        usable = [row for row in rows if row["image_id"] in vectors]
        errors = {row["caption_id"]: failed.get(row["image_id"], "no vector for this image")
                  for row in rows if row["image_id"] not in vectors}
        if not usable:
            return {}, errors
        texts = text_vectors(model, [row.get("text") or "" for row in usable], encoder=encoder)
        images = np.stack([vectors[row["image_id"]] for row in usable])
        cosines = model_steps.cosine_rows(images, texts)
        return {row["caption_id"]: round(float(c), 4) for row, c in zip(usable, cosines)}, errors

    def cutoffs(self, ids: np.ndarray, values: np.ndarray) -> tuple[dict, dict | None]:
        """Every cut-off known for this run (for the histogram), and the calibration's account (``ids``: the
        scored captions, sorted; ``values``: their scores)."""
        cutoffs = {"threshold": float(self.params["min_score"]),
                   "top_percent": top_percent_cutoff(values, float(self.params["top_percent"])), "calibrated": None}
        calibration = None
        if self.params["mode"] == "calibrated":
            judged = judgements(ids.tolist())
            at = np.searchsorted(ids, np.fromiter(judged, dtype=np.int64, count=len(judged)))
            scores = {c: round(float(values[i]), 4) for c, i in zip(judged, at.tolist()) if i < len(ids) and ids[i] == c}
            calibration = calibrate(scores, judged, float(self.params["target_precision"]), self.params["min_judged"])
            cutoffs["calibrated"] = calibration["cutoff"]
        return cutoffs, calibration


class _RunScores:
    """A run's alignment scores in two packed arrays (sorted caption ids, float32 scores), the captions that could
    not be scored and why, and what every decision shares (model, mode, cut-offs)."""

    def __init__(self, flt: Alignment, rows):
        self.flt, self.failure = flt, None
        model = model_steps.find(flt.params["model"], "clip")
        if model is None:
            self.failure = model_steps.no_model(flt.params["model"], "clip")
            return
        from pack import PackError

        ids, values, self.errors = array("q"), array("f"), {}
        try:
            batch: list[dict] = []
            for row in rows:
                batch.append(row)
                if len(batch) >= flt.SCORE_BATCH:
                    self._score(model, batch, ids, values)
                    batch = []
            self._score(model, batch, ids, values)
        except PackError as exc:  # missing or changed files: every caption says why
            self.failure = model_steps.unavailable(model, exc)
            return
        order = np.argsort(np.frombuffer(ids, dtype=np.int64) if ids else np.zeros(0, np.int64), kind="stable")
        self.ids = np.frombuffer(ids, dtype=np.int64)[order] if ids else np.zeros(0, np.int64)
        self.values = np.frombuffer(values, dtype=np.float32)[order] if values else np.zeros(0, np.float32)
        cutoffs, calibration = flt.cutoffs(self.ids, np.round(self.values.astype(float), 4))  # as scored
        mode = flt.params["mode"]
        self.cutoff = cutoffs[mode] if cutoffs.get(mode) is not None else cutoffs["threshold"]
        self.below = {"threshold": "below_threshold", "top_percent": "below_top_percent",
                      "calibrated": "below_calibrated" if cutoffs["calibrated"] is not None else "below_threshold"}[mode]
        self.common = {"model": model.key, "mode": mode, "cutoff": self.cutoff, "cutoffs": cutoffs}
        if mode == "calibrated":
            self.common["calibration"] = calibration
        self.model = model

    def _score(self, model, batch: list[dict], ids: array, values: array) -> None:
        if not batch:
            return
        scores, errors = self.flt.scores(model, batch)
        self.errors.update(errors)
        for caption_id, score in scores.items():
            ids.append(caption_id)
            values.append(score)

    def decision(self, caption_id: int) -> Decision:
        if self.failure is not None:
            return self.failure
        if caption_id in self.errors:
            return not_applicable("undecodable", model=self.model.key, error=self.errors[caption_id])
        at = int(np.searchsorted(self.ids, caption_id))
        if at >= len(self.ids) or self.ids[at] != caption_id:
            return not_applicable("not_in_run")
        score = round(float(self.values[at]), 4)
        if score >= self.cutoff:
            return keep("aligned", score, **self.common)
        return drop(self.below, score, **self.common)
