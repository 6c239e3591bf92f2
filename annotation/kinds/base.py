"""What every campaign kind is: the fields a kind declares, the interface the pages, the API and
the aggregation call on it, and the default behaviour, one answer among the kind's ``choices``
(the "choices" widget), which the plain rating kinds (``annotation.kinds.choices``) use as is.

A kind owns everything that differs between kinds, so no view asks which kind it holds:

- ``target``: "caption" (one caption with its image), "image" (write a caption for it) or
  "candidates" (several captions of one image shown together, shuffled per worker);
- values: ``validate(value, task)`` (the cleaned value, or ``VoteInvalid`` with a message),
  ``label_of(value)`` (the categorical label a vote counts as for dynamic overlap and agreement;
  None where that makes no sense, e.g. free text), ``parts(value)`` (for candidate kinds, {part:
  label} per candidate and dimension, so each part aggregates like a categorical or ordinal task of
  its own), ``is_correct`` (against a gold answer);
- the work page: ``widget`` (the name the panel carries as ``data-widget``; its template is
  ``widget_template``), ``widget_context`` (what that template shows of a task and a value),
  ``value_from_post`` (the value of the posted form, or ``VoteInvalid``), ``posted_value`` (what
  was posted, put back into the form after a refusal), ``display`` (a stored value in words, as a
  training item's expected answer), ``unsaved`` (a refused answer in words), ``editable``,
  ``example_gold`` and ``shows_caption``;
- the gold page: ``gold_from_form`` and ``gold_form_text`` (an expected answer typed and shown);
- the JSON API: ``task_payload`` (the task's caption, candidates and anything else the kind shows);
- the aggregation and results: ``label_field``, ``default_method``, ``scored``, ``written``, ``numeric``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

_TAG = re.compile(r"<[^>]*>")


class VoteInvalid(ValueError):
    """A vote value the campaign's kind does not accept."""


def check_typed_text(text: str, campaign, *, what: str, text_checks: bool = True) -> None:
    """The checks every text an annotator types passes (a written caption, a fixed rewrite), once it
    is whitespace-tidied and known not empty: at most ``campaign.text_max_chars``, some words besides
    markup and, with ``text_checks``, ``annotation.text_checks``. ``what`` names the text in the
    messages ("The caption"); raises ``VoteInvalid``."""
    if len(text) > campaign.text_max_chars:
        raise VoteInvalid(f"{what} is too long: {len(text)} characters, at most {campaign.text_max_chars}.")
    if not any(ch.isalpha() for ch in _TAG.sub(" ", text)):
        raise VoteInvalid(f"{what} has no words (markup alone is not a caption).")
    if text_checks:
        from ..text_checks import check_caption

        problem = check_caption(text, campaign.text_language)
        if problem:
            raise VoteInvalid(problem)


@dataclass(frozen=True)
class Choice:
    value: str
    label: str
    key: str  # keyboard shortcut


@dataclass(frozen=True)
class Kind:
    """A campaign kind; as it stands, one answer among ``choices`` (the value ``{"label": <choice>}``)."""

    name: str
    label: str
    target: str
    description: str = ""  # for curators: what the kind measures and how it is reported
    question: str = ""  # for annotators: what the work page asks (a campaign may word it its own way)
    seed: str = ""
    choices: tuple[Choice, ...] = ()
    scale: str = "nominal"  # "nominal", "ordinal" or "interval": the metric for Krippendorff's alpha
    default_votes: int = 3

    widget: ClassVar[str] = "choices"  # the work page's widget: annotation/work/widgets/<widget>.html
    editable: ClassVar[bool] = True  # a vote may be changed (undo) within the campaign's edit window
    example_gold: ClassVar[bool] = False  # a training item's gold answer is an example to compare with, not a verdict
    shows_caption: ClassVar[bool] = True  # the work page quotes the task's caption above the widget

    # how the aggregation and the results read the votes
    label_field: ClassVar[str] = "label"  # the key of a one-part value's label, and the name of its dimension
    default_method: ClassVar[str] = "majority"  # the results' method when none has been aggregated yet
    scored: ClassVar[bool] = False  # labels are scores: unrounded, counted in tens, good/bad for the discrete methods
    written: ClassVar[bool] = False  # votes are free text (representative caption, ROVER), with no labels to count

    # --- values ----------------------------------------------------------------------------
    def validate(self, value, task):
        allowed = {c.value for c in self.choices}
        if isinstance(value, dict):
            value = value.get("label")
        if not isinstance(value, str) or value not in allowed:
            raise VoteInvalid(f"{value!r} is not one of this campaign's choices: {', '.join(sorted(allowed))}.")
        return {"label": value}

    def label_of(self, value):
        return value.get("label") if isinstance(value, dict) else None

    def parts(self, value) -> dict[str, object]:
        label = self.label_of(value)
        return {"": label} if label is not None else {}

    def is_correct(self, value, gold_value, tolerance: float = 0.0) -> bool:
        return self.parts(value) == self.parts(gold_value)

    def candidate_order(self, task, worker_id: int) -> list[int]:
        return list(task.candidates or [])

    @property
    def numeric(self) -> bool:
        """Whether labels are numbers with an order: means per item (and Bradley-Terry for candidates)."""
        return False

    @property
    def categories(self) -> list[str]:
        return [c.value for c in self.choices]

    def describe(self) -> dict:
        return {"name": self.name, "label": self.label, "target": self.target, "seed": self.seed,
                "choices": [c.__dict__ for c in self.choices], "scale": self.scale,
                "description": self.description, "question": self.question}

    # --- the work page -----------------------------------------------------------------------
    @property
    def widget_template(self) -> str:
        return f"annotation/work/widgets/{self.widget}.html"

    def options(self) -> list[tuple]:
        """(value, label, key) of each answer a dimension takes."""
        return [(c.value, c.label, c.key) for c in self.choices]

    def _checked_options(self, value: dict) -> list[dict]:
        picked = value.get("label")
        return [{"value": v, "label": label, "key": key, "checked": picked == v} for v, label, key in self.options()]

    def widget_context(self, task, value: dict, worker_id: int) -> dict:
        """What the widget's template shows of ``task`` with ``value`` (a stored or posted value, {} for none)
        filled in; ``worker_id`` is the annotator's (0 in a preview)."""
        return {"options": self._checked_options(value), "text": value.get("text", "")}

    def value_from_post(self, post, candidates: list | None):
        """The value ``validate`` takes, from the form fields of the widget (``post``: a QueryDict;
        ``candidates``: the task's, for the kinds that rate them). ``VoteInvalid`` for a form left
        unanswered."""
        label = post.get("label", "")
        if not label:
            raise VoteInvalid("Choose an answer first.")
        return label

    def posted_value(self, post, candidates: list | None) -> dict:
        """What the annotator sent, in the shape of a stored value, to put back into the form."""
        return {"label": post.get("label", "")}

    def _label_text(self, value: dict, default):
        labels: dict = {c.value: c.label for c in self.choices}
        return labels.get(value.get("label"), default)

    def display(self, value) -> list[str]:
        """A stored value in words, one line each (a training item's expected answer; the template escapes)."""
        value = value if isinstance(value, dict) else {}
        return [self._label_text(value, str(value.get("label")))]

    def unsaved(self, value: dict) -> str:
        """A refused answer in words, for a task the page no longer shows: the text written or the answer picked."""
        return self._label_text(value, "")

    # --- the gold page ----------------------------------------------------------------------------
    def gold_from_form(self, raw: str):
        """The expected answer as typed on the gold page, in the form ``validate`` takes."""
        return raw

    def gold_form_text(self, gold, task) -> str:
        """What the gold page's answer field holds for ``task`` (``gold``: its GoldAnswer, or None)."""
        if gold is None:
            return ""
        value = gold.value
        if isinstance(value, dict):
            value = next(iter(value.values()), "")
        return "" if value is None else str(value)

    # --- the JSON API --------------------------------------------------------------------------
    def task_payload(self, task, worker_id: int) -> dict:
        """{"caption", "candidates", and what else the kind shows} of a task for the annotate API."""
        return {"caption": self._caption_payload(task), "candidates": self._candidates_payload(task, worker_id)}

    def _caption_payload(self, task) -> dict | None:
        if task.caption_id is None:
            return None
        return {"id": task.caption_id, "text": task.caption.text}

    def _candidates_payload(self, task, worker_id: int) -> list[dict]:
        if not task.candidates:
            return []
        from curation.models import Caption

        texts = dict(Caption.objects.filter(pk__in=task.candidates).values_list("pk", "text"))
        return [{"id": int(cid), "text": texts[int(cid)]} for cid in self.candidate_order(task, worker_id)
                if int(cid) in texts]
