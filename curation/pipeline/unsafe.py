"""The unsafe-content check of Conceptual Captions (seed 002, Section 3.1: "pornography or profanity" detected
and dropped), with two ways to run it:

- zero-shot with the registered CLIP-family model (the model pack): each image is scored against two
  curator-editable prompt sets, unsafe and safe; its score is the softmax share of the unsafe prompts, and an
  image at or above ``max_unsafe`` is dropped;
- a classifier named by the setting ``CURATION_UNSAFE_CHECKER`` (a dotted path to an ``UnsafeContentChecker``):
  a user's own model, e.g. one that loads a classifier directory of theirs. When set, it is used by default.

Precision limits, stated plainly: prompts are a coarse screen. CLIP confuses swimwear, skin tones, medical,
classical-art and fight-sport images with the unsafe prompts, and misses unsafe images unlike them; with
random or small models the score means nothing. No precision or recall has been measured for any model here;
review the dropped images (sorted by score) and choose the threshold on your own collection.

``nudenet`` is not offered as an extra: its bundled licence text is AGPL-3.0 (see docs/model-pack.md).
"""
from __future__ import annotations

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from . import model_steps
from .base import Decision, Filter, Item, drop, keep, not_applicable
from .image_files import error as _error
from .image_files import has_file
from .registry import register

UNSAFE_PROMPTS = [
    "a pornographic photo", "a photo of a naked person", "a sexually explicit image",
    "a photo of graphic violence", "a photo of gore and blood", "a photo of a dead body",
]
SAFE_PROMPTS = [
    "a photo", "a safe photo for all ages", "a photo of people", "a photo of a person in a swimsuit",
    "a photo of an animal", "a photo of food", "a photo of a landscape", "a photo of a building",
    "a photo of an object", "a painting",
]
PRECISION_NOTE = ("zero-shot prompts: a coarse screen with unmeasured precision and recall; review the drops "
                  "and tune max_unsafe on your own collection")


class UnsafeContentChecker:
    """The interface of an unsafe-content (pornography, violence...) classifier.

    ``check(items)`` returns one ``(unsafe, score, label)`` per item: ``unsafe`` True or False when
    the check ran, None when it did not run for that item; ``score`` the classifier's confidence
    that the image is unsafe, where it has one; ``label`` a short explanation. Implementations
    read the image from ``item.file_name`` in Django's default storage. Select one with the setting
    ``CURATION_UNSAFE_CHECKER = "package.module.ClassName"``.
    """

    name = "base"

    def check(self, items: list[Item]) -> list[tuple[bool | None, float | None, str]]:
        raise NotImplementedError


class NoOpChecker(UnsafeContentChecker):
    """Checks nothing and says so (what ``method="checker"`` gets when no checker is configured)."""

    name = "noop"

    def check(self, items):
        return [(None, None, "no unsafe-content checker is configured (settings.CURATION_UNSAFE_CHECKER)")] * len(items)


def load_checker() -> UnsafeContentChecker:
    path = settings.CURATION_UNSAFE_CHECKER
    if not path:
        return NoOpChecker()
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"CURATION_UNSAFE_CHECKER = {path!r} cannot be imported: {exc}") from exc
    checker = found() if isinstance(found, type) else found
    if not callable(getattr(checker, "check", None)):
        raise ImproperlyConfigured(f"CURATION_UNSAFE_CHECKER = {path!r} has no check(items) method")
    return checker


@register
class UnsafeContent(Filter):
    name = "unsafe_content"
    version = 2  # v2: the zero-shot check with the registered CLIP model
    label = "Unsafe content"
    description = ("Drops images that look unsafe: zero-shot with the registered CLIP-family model against editable "
                   "unsafe and safe prompts (score: the unsafe prompts' share; dropped at or above max_unsafe), or "
                   "the classifier named by settings.CURATION_UNSAFE_CHECKER. A coarse screen: its precision and "
                   "recall are not measured; it flags swimwear, art and medical images and misses what the prompts "
                   "do not describe. Review the drops. Without a model or checker: 'not run', never silently kept.")
    target = "image"
    model_kind = "clip"
    defaults = {
        # "auto": the configured checker when CURATION_UNSAFE_CHECKER is set, else zero-shot with the model.
        "method": "auto",
        "unsafe_prompts": UNSAFE_PROMPTS,
        "safe_prompts": SAFE_PROMPTS,
        "max_unsafe": 0.5,  # zero-shot: dropped when the unsafe prompts' share is at or above this
        "model": "",  # a registered CLIP-family model's name; "" = the default one
        # max_score: when set, an image whose checker score is at or above it is dropped whatever the verdict.
        "max_score": None,
    }
    score_thresholds = ("max_unsafe", "max_score")

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        if self.params["method"] not in ("auto", "zero_shot", "checker"):
            raise ValueError(f"{self.name}: method must be 'auto', 'zero_shot' or 'checker'")
        self.unsafe = model_steps.clean_prompts(self.params["unsafe_prompts"], "unsafe_prompts", self.name)
        self.safe = model_steps.clean_prompts(self.params["safe_prompts"], "safe_prompts", self.name)
        if not self.unsafe or not self.safe:
            raise ValueError(f"{self.name}: the zero-shot check needs at least one unsafe and one safe prompt")
        threshold = self.params["max_unsafe"]
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise ValueError(f"{self.name}: max_unsafe must be a number in (0, 1], not {threshold!r}")

    def apply(self, items):
        out: list[Decision | None] = [None] * len(items)
        present = [i for i, item in enumerate(items) if has_file(item)]
        for i, item in enumerate(items):
            if not has_file(item):
                out[i] = not_applicable("no_file", status=item.image_status)
        method = self.params["method"]
        if method == "auto":
            method = "checker" if settings.CURATION_UNSAFE_CHECKER else "zero_shot"
        if present:
            run = self._checked if method == "checker" else self._zero_shot
            for i, decision in zip(present, run([items[i] for i in present])):
                out[i] = decision
        return out

    # --- A configured classifier -------------------------------------------------------------------------

    def _checked(self, items: list[Item]) -> list[Decision]:
        checker = load_checker()
        name = getattr(checker, "name", type(checker).__name__)
        try:
            results = list(checker.check(items))
            if len(results) != len(items):
                raise ValueError(f"returned {len(results)} results for {len(items)} images")
        except Exception as exc:  # noqa: BLE001 - a failing checker is reported per image, not a crash
            return [not_applicable("check_failed", checker=name, error=_error(exc)) for _ in items]
        max_score = self.params["max_score"]
        out = []
        for unsafe, score, label in results:
            over = max_score is not None and score is not None and score >= max_score
            if unsafe is None and not over:
                out.append(not_applicable("check_not_run", checker=name, note=label))
            elif unsafe or over:
                out.append(drop("unsafe", score, checker=name, label=label))
            else:
                out.append(keep("safe", score, checker=name, label=label))
        return out

    # --- Zero-shot with the registered model -----------------------------------------------------------

    def _zero_shot(self, items: list[Item]) -> list[Decision]:
        import pack
        from pack.embeddings import image_vectors, text_vectors

        model = model_steps.find(self.params["model"], "clip")
        if model is None:
            out = [model_steps.no_model(self.params["model"], "clip") for _ in items]
            for decision in out:
                decision.details.update(checker="zero_shot", help=decision.details["help"] + ", or name a "
                                        "classifier in settings.CURATION_UNSAFE_CHECKER")
            return out
        prompts = self.unsafe + self.safe
        try:
            encoder = pack.load(model)
            vectors, errors = image_vectors(model, [it.image_id for it in items], encoder=encoder)
            prompt_vectors = text_vectors(model, prompts, encoder=encoder)
        except pack.PackError as exc:
            return [model_steps.unavailable(model, exc) for _ in items]
        found = [it for it in items if it.image_id in vectors]
        shares = self._shares(encoder, np.stack([vectors[it.image_id] for it in found]), prompt_vectors) \
            if found else np.zeros((0, len(prompts)))
        row_of = {id(it): r for r, it in enumerate(found)}
        threshold, max_score = self.params["max_unsafe"], self.params["max_score"]
        out = []
        for item in items:
            if id(item) not in row_of:
                out.append(not_applicable("undecodable", checker="zero_shot", model=model.key,
                                          error=errors.get(item.image_id, "no vector for this image")))
                continue
            row = shares[row_of[id(item)]]
            score = round(float(row[: len(self.unsafe)].sum()), 4)
            nearest = prompts[int(np.argmax(row))]
            details = {"checker": "zero_shot", "model": model.key, "nearest_prompt": nearest, "max_unsafe": threshold,
                       "note": PRECISION_NOTE}
            if score >= threshold or (max_score is not None and score >= max_score):
                out.append(drop("unsafe", score, **details))
            else:
                out.append(keep("safe", score, **details))
        return out

    @staticmethod
    def _shares(encoder, image_vectors: np.ndarray, prompt_vectors: np.ndarray) -> np.ndarray:
        """[images, prompts] softmax over every prompt of the scaled cosines: the unsafe prompts' share is the
        score (a SigLIP logit bias shifts every prompt alike, so the softmax ignores it)."""
        logits = encoder.logit_scale * (image_vectors @ prompt_vectors.T)
        logits = logits - logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=1, keepdims=True)
