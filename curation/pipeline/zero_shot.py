"""Zero-shot image labels (seed 002, Section 3, "Image&Text-based Filtering"): the paper labels every image
with a large-vocabulary classifier (5 to 20 labels each) and keeps a caption only when one of its words
matches a label. Here a registered CLIP-family model (the model pack) scores each image against a prompt per
label ("a photo of a dog.") and the top labels become the image's labels for the ``label_overlap`` step that
follows, so that step decides keep or drop instead of "not applicable".

The default vocabulary is Open Images' boxable classes (data/openimages_boxable.txt; CC BY 4.0, Google: see
the note beside it). A label's score is its share of the image's softmax over the vocabulary (with the
model's logit scale), or its own sigmoid for SigLIP models (which have a logit bias): a ranking within the
vocabulary, not a calibrated probability that the object is there.

Labels imported with the image (metadata "labels") take precedence: such an image is not labelled again.
Predicted labels are also kept on the image, ``Image.metadata["predicted_labels"]``, for its page and API.
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import model_steps
from .base import Decision, Filter, Item, keep, not_applicable
from .image_files import has_file
from .image_filters import check_number
from .registry import register

VOCABULARY_FILE = Path(__file__).with_name("data") / "openimages_boxable.txt"
_QUALIFIER_RE = re.compile(r"\s*\(([^)]*)\)\s*$")  # "Bat (Animal)": the qualifier disambiguates the prompt only


@lru_cache(maxsize=1)
def default_vocabulary() -> tuple[str, ...]:
    return tuple(line.strip() for line in VOCABULARY_FILE.read_text(encoding="utf-8").splitlines() if line.strip())


def label_name(entry: str) -> str:
    """The label a caption is matched against: lower case, without a class name's qualifier ("bat", not
    "bat (animal)", whose word "animal" would match any caption about animals)."""
    return _QUALIFIER_RE.sub("", entry).strip().lower() or entry.strip().lower()


def prompt_of(template: str, entry: str) -> str:
    return template.replace("{}", entry.strip().lower())


def zero_shot_scores(encoder, image_vectors: np.ndarray, label_vectors: np.ndarray) -> np.ndarray:
    """[images, labels] scores: softmax over the labels of the scaled cosines (CLIP), or each label's sigmoid
    where the model has a logit bias (SigLIP, trained with a sigmoid loss)."""
    logits = encoder.logit_scale * (image_vectors @ label_vectors.T) + encoder.logit_bias
    if encoder.logit_bias:
        return 1.0 / (1.0 + np.exp(-logits))
    logits = logits - logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=1, keepdims=True)


def imported_labels(item: Item) -> list:
    metadata = item.metadata if isinstance(item.metadata, dict) else {}
    return metadata.get("labels") or []


def save_predicted(items: list[Item]) -> None:
    """Keep the predictions on the images (read-only metadata in the API, so nothing else writes it during a
    run): the item holds the row's whole metadata, so one bulk update writes it back."""
    from ..models import Image

    rows = [Image(pk=it.image_id, metadata=it.metadata) for it in items]
    if rows:
        Image.objects.bulk_update(rows, ["metadata"], batch_size=500)


@register
class ImageLabels(Filter):
    name = "image_labels"
    label = "Zero-shot image labels"
    description = ("Labels each image with a registered CLIP-family model against a vocabulary (default: Open "
                   "Images' boxable classes) and passes the top labels to label_overlap. Scores rank labels within "
                   "the vocabulary; they are not probabilities that the object is present. Images imported with "
                   "labels keep those. Never drops an image.")
    target = "image"
    model_kind = "clip"
    defaults = {
        "vocabulary": [],  # label names; [] = Open Images' boxable classes (data/openimages_boxable.txt)
        "prompt_template": "a photo of a {}.",  # CLIP's ImageNet prompt; "{}" is the label
        "top_k": 10,  # the paper's classifier gave 5 to 20 labels an image
        "min_score": 0.0,  # leave out labels scored below this (softmax share over the vocabulary)
        "model": "",  # a registered CLIP-family model's name; "" = the default one
    }

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        raw = self.params["vocabulary"]
        if raw in ([], "", None):
            self.entries, self.vocabulary_name = list(default_vocabulary()), "openimages_boxable"
        else:
            self.entries = model_steps.clean_prompts(raw, "vocabulary", self.name)
            if not self.entries:
                raise ValueError(f"{self.name}: the vocabulary has no labels (only blank entries); leave it "
                                 f"empty ([]) for Open Images' boxable classes")
            self.vocabulary_name = "custom"
        template = self.params["prompt_template"]
        if not isinstance(template, str) or template.count("{}") != 1:
            raise ValueError(f"{self.name}: prompt_template must contain '{{}}' once, where the label goes "
                             f"(e.g. 'a photo of a {{}}.'), not {template!r}")
        check_number(self, "top_k", 1, integer=True)
        check_number(self, "min_score", 0)
        if not isinstance(self.params["model"], str):
            raise ValueError(f"{self.name}: model must be a registered model's name, or '' for the default")
        self.names = [label_name(e) for e in self.entries]
        self.prompts = [prompt_of(template, e) for e in self.entries]
        self.vocabulary_id = hashlib.sha256("\n".join(self.prompts).encode()).hexdigest()[:12]

    def apply(self, items: list[Item]) -> list[Decision]:
        out: list[Decision | None] = [None] * len(items)
        todo = []
        for i, item in enumerate(items):
            if imported_labels(item):
                out[i] = keep("imported_labels", source="metadata", labels=item.labels[:20])
            elif not has_file(item):
                out[i] = not_applicable("no_file", status=item.image_status)
            else:
                todo.append(i)
        if todo:
            for i, decision in zip(todo, self._label([items[i] for i in todo])):
                out[i] = decision
        return out

    def _label(self, items: list[Item]) -> list[Decision]:
        import pack
        from pack.embeddings import image_vectors, text_vectors

        model = model_steps.find(self.params["model"], "clip")
        if model is None:
            return [model_steps.no_model(self.params["model"], "clip") for _ in items]
        try:
            encoder = pack.load(model)
            vectors, errors = image_vectors(model, [it.image_id for it in items], encoder=encoder)
            label_vectors = text_vectors(model, self.prompts, encoder=encoder)
        except pack.PackError as exc:
            return [model_steps.unavailable(model, exc) for _ in items]
        found = [it for it in items if it.image_id in vectors]
        scores = zero_shot_scores(encoder, np.stack([vectors[it.image_id] for it in found]), label_vectors) \
            if found else np.zeros((0, len(self.prompts)))
        row_of = {id(it): r for r, it in enumerate(found)}
        out, labelled = [], []
        for item in items:
            if id(item) not in row_of:
                out.append(not_applicable("undecodable", model=model.key,
                                          error=errors.get(item.image_id, "no vector for this image")))
                continue
            labels = self._top(scores[row_of[id(item)]])
            self._note(item, model.key, labels)
            labelled.append(item)
            out.append(keep("labelled", labels[0]["score"] if labels else None, model=model.key, labels=labels,
                            vocabulary=self.vocabulary_name, vocabulary_size=len(self.names),
                            prompt=self.params["prompt_template"]))
        save_predicted(labelled)
        return out

    def _top(self, row: np.ndarray) -> list[dict]:
        order = np.argsort(-row, kind="stable")[: self.params["top_k"]]
        labels, seen = [], set()
        for j in order:
            score = float(row[j])
            if score < self.params["min_score"] or self.names[j] in seen:
                continue
            seen.add(self.names[j])
            labels.append({"label": self.names[j], "score": round(score, 4)})
        return labels

    def _note(self, item: Item, key: str, labels: list[dict]) -> None:
        """The labels go on the item in place: its captions' items share the image's label list and metadata,
        so the label_overlap step after this one compares the captions with them."""
        item.labels[:] = [entry["label"] for entry in labels]
        if not isinstance(item.metadata, dict):
            item.metadata = {}
        item.metadata["predicted_labels"] = {"model": key, "vocabulary": self.vocabulary_name,
                                             "vocabulary_id": self.vocabulary_id, "labels": labels}
