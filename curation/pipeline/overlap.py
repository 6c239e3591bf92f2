"""Image & text label overlap (seed 002, Section 3, "Image&Text-based Filtering").

The paper labels each image with a large-vocabulary classifier (5 to 20 labels an image) and drops
pairs where no caption token matches a label, "taking into account morphology-based stemming as
provided by the text annotation". Here the caption side is spaCy's lemmas of nouns, verbs and
adjectives; the label side comes from the image's imported metadata ("labels": strings, or objects
with "label"/"name" and "score"), or from a pluggable labeller named by the setting
``CURATION_IMAGE_LABELLER`` (a dotted path to an ``ImageLabeller`` subclass) for images that have
none. An image with no labels gets "not applicable": without labels there is nothing to compare.
"""
from __future__ import annotations

import re
from functools import lru_cache

from .base import Decision, Filter, Item, drop, keep, not_applicable
from .registry import register

SETTING = "CURATION_IMAGE_LABELLER"
MAX_LISTED = 20
_LABEL_WORD_RE = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_WORD_RE = re.compile(r"\w+(?:[-'’.]\w+)*")
# Words of multiword labels that say nothing about content ("Sky of the evening" matches on "sky").
_LABEL_STOP = frozenset({"a", "an", "the", "of", "and", "or", "in", "on", "at", "for", "with", "to", "by", "from"})


def normalise_labels(raw, min_score: float = 0.0) -> list[str]:
    """Label strings from what an importer or a labeller gives: strings, or {"label"|"name", "score"}."""
    out = []
    for entry in raw if isinstance(raw, (list, tuple)) else []:
        if isinstance(entry, str):
            label = entry
        elif isinstance(entry, dict) and (entry.get("label") or entry.get("name")):
            score = entry.get("score")
            if isinstance(score, (int, float)) and score < min_score:
                continue
            label = str(entry.get("label") or entry.get("name"))
        else:
            continue
        label = " ".join(label.split()).lower()
        if label and label not in out:
            out.append(label)
    return out


class ImageLabeller:
    """Assigns class labels to images (the paper: Google Cloud Vision, about 10^5 classes).

    Subclasses implement ``labels``; they are constructed without arguments, once per process.
    Images the labeller cannot label are left out of the result (or given []).
    """

    name = "labeller"

    def labels(self, image_ids: list[int]) -> dict[int, list[str]]:
        raise NotImplementedError


def predicted(metadata: dict) -> list:
    """Labels an earlier run's ``image_labels`` step stored on the image (used when none were imported)."""
    found = metadata.get("predicted_labels") if isinstance(metadata, dict) else None
    return list(found.get("labels") or []) if isinstance(found, dict) else []


class MetadataLabeller(ImageLabeller):
    """The default: labels imported with the images (the metadata key "labels"), as the executor passed them
    on the items. It never calls a model, so images imported without labels stay unlabelled."""

    name = "metadata"

    def __init__(self, items: list[Item] = (), min_score: float = 0.0):
        self._labels: dict[int, list[str]] = {}
        for item in items:
            metadata = item.metadata if isinstance(item.metadata, dict) else {}
            # The metadata keeps the labels' scores; item.labels (names only) serves items built without it.
            raw = metadata["labels"] if "labels" in metadata else list(item.labels or []) or predicted(metadata)
            self._labels[item.image_id] = normalise_labels(raw, min_score)

    def labels(self, image_ids: list[int]) -> dict[int, list[str]]:
        return {image_id: list(self._labels.get(image_id, [])) for image_id in image_ids}


@lru_cache(maxsize=4)
def _configured(path: str) -> ImageLabeller:
    from django.utils.module_loading import import_string

    cls = import_string(path)
    if not (isinstance(cls, type) and issubclass(cls, ImageLabeller)):
        raise TypeError(f"{SETTING}={path!r} is not an ImageLabeller subclass")
    return cls()


def configured_labeller() -> ImageLabeller | None:
    """The labeller named by settings.CURATION_IMAGE_LABELLER, read when a run needs it; None when unset."""
    from django.conf import settings

    path = settings.CURATION_IMAGE_LABELLER
    return _configured(path) if path else None


@lru_cache(maxsize=50_000)
def _label_forms(label: str) -> frozenset[str]:
    """A label and, for a multiword label, its content words, each with a naive singular ("dogs" -> "dog")."""
    words = _LABEL_WORD_RE.findall(label)
    forms = {label}
    if len(words) > 1:
        forms |= {w for w in words if w not in _LABEL_STOP}
    return frozenset(forms | {_singular(f) for f in forms})


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@register
class LabelOverlap(Filter):
    name = "label_overlap"
    label = "Image & text label overlap"
    description = ("Drops pairs where no caption lemma (nouns, verbs, adjectives; multiword labels also match as "
                   "a phrase or by their words) matches any image label. Images without labels: not applicable.")
    needs = frozenset({"lemma"})
    defaults = {
        "pos": ["NOUN", "PROPN", "VERB", "ADJ"],  # proper nouns too: title-case common nouns get PROPN
        "min_label_score": 0.0,  # ignore imported labels scored below this
        "match_label_words": True,  # "landing gear" also matches a caption's "gear"
    }

    def wants_doc(self, item: Item) -> bool:
        """Only captions of labelled images are compared: without a labeller, an image imported without
        labels gets "not applicable" and its captions need no parse."""
        metadata = item.metadata if isinstance(item.metadata, dict) else {}
        return bool(metadata.get("labels") or item.labels or predicted(metadata)) or configured_labeller() is not None

    def apply(self, items: list[Item]) -> list[Decision]:
        labels = MetadataLabeller(items, self.params["min_label_score"]).labels([it.image_id for it in items])
        missing = sorted({image_id for image_id, found in labels.items() if not found})
        labeller = configured_labeller() if missing else None
        if labeller is not None:
            for image_id, found in (labeller.labels(missing) or {}).items():
                if image_id in labels and not labels[image_id]:
                    labels[image_id] = normalise_labels(found, self.params["min_label_score"])
        source = labeller.name if labeller is not None else MetadataLabeller.name
        forms: dict[str, dict] = {}  # the caption side, once per distinct text
        out = []
        for item in items:
            image_labels = labels.get(item.image_id) or []
            if image_labels and (item.text or "").strip() and item.text not in forms:
                forms[item.text] = self._caption_forms(item)
            out.append(self._decide(item, image_labels, source, forms.get(item.text)))
        return out

    def _decide(self, item: Item, labels: list[str], source: str, caption: dict | None) -> Decision:
        if not labels:
            return not_applicable("no_labels", labeller=source)
        if caption is None:
            return drop("empty", labels=labels[:MAX_LISTED])
        matched = []
        for label in labels:
            forms = _label_forms(label) if self.params["match_label_words"] else {label, _singular(label)}
            if forms & caption["words"] or f" {label} " in caption["text"]:
                matched.append(label)
        details = {"labels": labels[:MAX_LISTED]}
        if matched:
            return keep(score=len(matched), matched=matched[:MAX_LISTED], **details)
        return drop("no_overlap", score=0, **details)

    def _caption_forms(self, item: Item) -> dict:
        """Lower-cased lemmas and forms of the caption's content words, and its lemma sequence for phrases."""
        wanted = set(self.params["pos"])
        if item.doc is not None:
            tokens = [t for t in item.doc if not (t.is_punct or t.is_space)]
            words = set()
            for t in tokens:
                if t.pos_ in wanted:
                    words |= {t.lemma_.lower(), t.text.lower(), _singular(t.text.lower())}
            # Lemmas and surface words as two runs ("|" keeps a phrase from spanning both).
            sequence = " ".join(t.lemma_.lower() for t in tokens) + " | " + " ".join(t.text.lower() for t in tokens)
        else:  # unparsed (a text too long to parse): every word counts
            found = [w.lower() for w in _WORD_RE.findall(item.text or "")]
            words = set(found) | {_singular(w) for w in found}
            sequence = " ".join(found)
        return {"words": words, "text": f" {sequence} "}
