"""Campaign kinds: what a task shows, what a vote may hold, and how votes aggregate.

A kind is a small object; a new kind is a new instance (or a small subclass) registered here,
never a copy of the pages or the routing. Every kind declares:

- ``target``: "caption" (one caption with its image), "image" (write a caption for it) or
  "candidates" (several captions of one image shown together, shuffled per worker);
- ``validate(value, task)``: the cleaned value, or ``VoteInvalid`` with a message;
- ``label_of(value)``: the categorical label a vote counts as for dynamic overlap and agreement
  (None where that makes no sense, e.g. free text);
- ``parts(value)``: for candidate kinds, {part: label} per candidate and dimension, so each part
  aggregates like a categorical or ordinal task of its own.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass


_TAG = re.compile(r"<[^>]*>")


class VoteInvalid(ValueError):
    """A vote value the campaign's kind does not accept."""


def _check_typed_text(text: str, campaign, *, what: str, text_checks: bool = True) -> None:
    """The checks every text an annotator types passes (a written caption, a fixed rewrite), once it
    is whitespace-tidied and known not empty: at most ``campaign.text_max_chars``, some words besides
    markup and, with ``text_checks``, ``annotation.text_checks``. ``what`` names the text in the
    messages ("The caption"); raises ``VoteInvalid``."""
    if len(text) > campaign.text_max_chars:
        raise VoteInvalid(f"{what} is too long: {len(text)} characters, at most {campaign.text_max_chars}.")
    if not any(ch.isalpha() for ch in _TAG.sub(" ", text)):
        raise VoteInvalid(f"{what} has no words (markup alone is not a caption).")
    if text_checks:
        from .text_checks import check_caption

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
    name: str
    label: str
    target: str
    description: str = ""  # for curators: what the kind measures and how it is reported
    question: str = ""  # for annotators: what the work page asks (a campaign may word it its own way)
    seed: str = ""
    choices: tuple[Choice, ...] = ()
    scale: str = "nominal"  # "nominal", "ordinal" or "interval": the metric for Krippendorff's alpha
    default_votes: int = 3

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
    def categories(self) -> list[str]:
        return [c.value for c in self.choices]

    def describe(self) -> dict:
        return {"name": self.name, "label": self.label, "target": self.target, "seed": self.seed,
                "choices": [c.__dict__ for c in self.choices], "scale": self.scale,
                "description": self.description, "question": self.question}


@dataclass(frozen=True)
class SliderKind(Kind):
    """A 0-100 score (AVA-Captions informativeness as a slider). Labels for agreement are the
    score itself (interval metric); dynamic overlap uses the good/bad side of 50."""

    minimum: int = 0
    maximum: int = 100
    scale: str = "interval"

    def validate(self, value, task):
        if isinstance(value, dict):
            value = value.get("score")
        if isinstance(value, bool):
            raise VoteInvalid("The score must be a number.")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise VoteInvalid("The score must be a number.") from None
        if number != number or not self.minimum <= number <= self.maximum:
            raise VoteInvalid(f"The score must be between {self.minimum} and {self.maximum}.")
        return {"score": round(number, 2)}

    def label_of(self, value):
        return value.get("score") if isinstance(value, dict) else None

    def parts(self, value):
        score = self.label_of(value)
        return {"": score} if score is not None else {}

    def side(self, value) -> str | None:
        score = self.label_of(value)
        return None if score is None else ("good" if score >= (self.minimum + self.maximum) / 2 else "bad")

    def is_correct(self, value, gold_value, tolerance: float = 0.0) -> bool:
        a, b = self.label_of(value), self.label_of(gold_value)
        return a is not None and b is not None and abs(a - b) <= max(tolerance, 0.0)


@dataclass(frozen=True)
class WriteKind(Kind):
    """Write a caption for an image (Flickr8k-style: several independent captions per image)."""

    scale: str = "text"
    default_votes: int = 5

    def validate(self, value, task, *, text_checks: bool = True):
        """``text_checks``: markup, gibberish and language (``annotation.text_checks``), for the
        annotator who can still fix the text; an import of work already done elsewhere (an MTurk
        batch file) records what was written and leaves the judgement to the requester's review."""
        if isinstance(value, dict):
            value = value.get("text")
        if not isinstance(value, str):
            raise VoteInvalid("A caption must be text.")
        text = " ".join(value.split())
        campaign = task.campaign
        if not text:
            raise VoteInvalid("The caption is empty.")
        if len(text) < campaign.text_min_chars:
            raise VoteInvalid(f"The caption is too short: at least {campaign.text_min_chars} characters.")
        _check_typed_text(text, campaign, what="The caption", text_checks=text_checks)
        return {"text": text}

    def label_of(self, value):
        return None

    def parts(self, value):
        return {}

    def is_correct(self, value, gold_value, tolerance: float = 0.0) -> bool:
        return True


@dataclass(frozen=True)
class CandidatesKind(Kind):
    """Several captions of one image shown together in a per-worker shuffled order, each rated on
    every dimension: ``{"ratings": {"<caption id>": {"<dimension>": value}}}``."""

    dimensions: tuple[str, ...] = ("label",)
    scale_values: tuple = ()  # allowed values of each dimension

    def validate(self, value, task):
        ratings = value.get("ratings") if isinstance(value, dict) else None
        if not isinstance(ratings, dict):
            raise VoteInvalid("The vote needs a rating for every candidate caption.")
        expected = {str(c) for c in task.candidates or []}
        given = {str(k) for k in ratings}
        if given != expected:
            raise VoteInvalid("The vote must rate exactly the candidate captions shown.")
        clean = {}
        for cid, dims in ratings.items():
            if not isinstance(dims, dict) or set(dims) != set(self.dimensions):
                raise VoteInvalid(f"Each candidate needs {', '.join(self.dimensions)}.")
            row = {}
            for dim in self.dimensions:
                v = dims[dim]
                if isinstance(v, str) and v.isdigit():
                    v = int(v)
                if isinstance(v, bool) or v not in self.scale_values:
                    raise VoteInvalid(f"{dim} must be one of {', '.join(map(str, self.scale_values))}.")
                row[dim] = v
            clean[str(cid)] = row
        return {"ratings": clean}

    def label_of(self, value):
        return None

    def parts(self, value):
        ratings = value.get("ratings", {}) if isinstance(value, dict) else {}
        return {f"{cid}:{dim}": v for cid, dims in ratings.items() for dim, v in dims.items()}

    def candidate_order(self, task, worker_id: int) -> list[int]:
        order = list(task.candidates or [])
        random.Random(f"{task.pk}:{worker_id}").shuffle(order)
        return order


@dataclass(frozen=True)
class VerifyRewriteKind(Kind):
    """Verify a rewrite a filter was unsure of (hypernymization's ``uncertain_rewrite``): the task's
    source decision holds the original caption (text_before) and the rewrite (text_after). The vote is
    ``{"label": "keep"}``, ``{"label": "drop"}`` or ``{"label": "fix", "text": "<the corrected rewrite>"}``;
    the label alone counts for agreement and dynamic overlap, the fixed texts are tallied when the
    verdicts are applied (``annotation.verify_rewrites``)."""

    def validate(self, value, task, *, text_checks: bool = True):
        label, text = (value.get("label"), value.get("text")) if isinstance(value, dict) else (value, None)
        allowed = [c.value for c in self.choices]
        if not isinstance(label, str) or label not in allowed:
            raise VoteInvalid(f"{label!r} is not one of this campaign's answers: {', '.join(allowed)}.")
        if label != "fix":
            return {"label": label}
        if text is not None and not isinstance(text, str):
            raise VoteInvalid("The corrected rewrite must be text.")
        text = " ".join((text or "").split())
        if not text:
            raise VoteInvalid("Fix needs the corrected rewrite: type it in the box (or choose Keep or Drop).")
        _check_typed_text(text, task.campaign, what="The corrected rewrite", text_checks=text_checks)
        return {"label": label, "text": text}


FLUENCY = Kind(
    name="fluency", label="Rate fluency", target="caption", seed="004",
    description="Is the sentence fluent English? Sentences with inconsistent or 'difficult' votes are "
                "left out of the fluency classifier's training data (seed 004, Section 3).",
    question="Is this sentence fluent English?",
    choices=(Choice("fluent", "Fluent", "1"), Choice("not_fluent", "Not fluent", "2"),
             Choice("difficult", "Difficult to tell", "3")),
    default_votes=2,
)
INFORMATIVENESS = Kind(
    name="informativeness", label="Rate informativeness (good / bad)", target="caption", seed="000",
    description="Does the comment describe what is in the picture?",
    question="Does the comment describe what is in the picture?",
    choices=(Choice("good", "Good", "1"), Choice("bad", "Bad", "2")),
)
INFORMATIVENESS_SCORE = SliderKind(
    name="informativeness_score", label="Rate informativeness (0-100 slider)", target="caption", seed="000",
    description="How much does the comment tell about the picture, from 0 (nothing) to 100?",
    question="How much does the comment tell about the picture, from 0 (nothing) to 100?",
)
QUALITY = Kind(
    name="quality", label="GOOD / BAD caption quality", target="caption", seed="002",
    description="Is this a good caption for the image? Reported as the share of items with 1+, 2+ and "
                "3+ GOOD votes out of 3 (seed 002, Table 2).",
    question="Is this a good caption for the image?",
    choices=(Choice("good", "GOOD", "1"), Choice("bad", "BAD", "2")),
)
RELEVANCE_FLUENCY = CandidatesKind(
    name="relevance_fluency", label="Relevance and fluency 1-5 of candidate captions", target="candidates",
    seed="004", scale="ordinal",
    description="Candidate captions of one image, shown together in a shuffled order; rate each for "
                "relevance to the image and for fluency from 1 (worst) to 5 (best) (seed 004, Table 6).",
    question="Rate each caption for how well it fits the image (relevance) and how well it reads (fluency), "
             "from 1 (worst) to 5 (best).",
    dimensions=("relevance", "fluency"), scale_values=(1, 2, 3, 4, 5),
)
GOOD_COMMON_BAD = CandidatesKind(
    name="good_common_bad", label="Good / Common / Bad per generated caption", target="candidates", seed="000",
    description="Each generated caption: Good (informative and specific to this image), Common (true but "
                "generic) or Bad (wrong) (seed 000, Table 2).",
    question="Rate each caption: Good (informative and specific to this image), Common (true but could fit "
             "many images) or Bad (wrong).",
    choices=(Choice("good", "Good", "1"), Choice("common", "Common", "2"), Choice("bad", "Bad", "3")),
    dimensions=("label",), scale_values=("good", "common", "bad"),
)
WRITE = WriteKind(
    name="write", label="Write a caption", target="image", seed="001",
    description="Describe the image in one sentence: who or what is there, what they are doing, where "
                "(the Flickr8k protocol: several independent captions per image).",
    question="Describe the image in one sentence: who or what is there, what they are doing, and where.",
)

VERIFY_REWRITE = VerifyRewriteKind(
    name="verify_rewrite", label="Verify uncertain rewrites (keep / fix / drop)", target="caption", seed="002",
    description="A rewrite hypernymization was unsure of (an entity type guessed from context, e.g. an unknown "
                "name next to a landmark) shown with the original caption: Keep it, Fix it (type the corrected "
                "rewrite) or Drop the caption. Applying the verdicts writes them onto the run's decisions (seed "
                "002, Section 3.4: the people-and-models stand-in for the paper's Knowledge Graph).",
    question="Is the rewrite a correct, name-free version of the original caption?",
    choices=(Choice("keep", "Keep: the rewrite is right", "1"), Choice("fix", "Fix: I type the correct rewrite", "2"),
             Choice("drop", "Drop: the caption cannot be saved", "3")),
)

KINDS: dict[str, Kind] = {k.name: k for k in (WRITE, FLUENCY, INFORMATIVENESS, INFORMATIVENESS_SCORE, QUALITY,
                                               RELEVANCE_FLUENCY, GOOD_COMMON_BAD, VERIFY_REWRITE)}
KIND_CHOICES = [(k.name, k.label) for k in KINDS.values()]


def get_kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise VoteInvalid(f"Unknown campaign kind {name!r}.") from None


__all__ = ["Kind", "Choice", "SliderKind", "WriteKind", "CandidatesKind", "VerifyRewriteKind", "KINDS", "KIND_CHOICES",
           "get_kind", "VoteInvalid"]
