"""The rating kinds that take one answer among a few choices, as ``Kind`` does by default: fluency
(seed 004), informativeness good / bad (seed 000) and caption quality GOOD / BAD (seed 002)."""
from __future__ import annotations

from .base import Choice, Kind

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
QUALITY = Kind(
    name="quality", label="GOOD / BAD caption quality", target="caption", seed="002",
    description="Is this a good caption for the image? Reported as the share of items with 1+, 2+ and "
                "3+ GOOD votes out of 3 (seed 002, Table 2).",
    question="Is this a good caption for the image?",
    choices=(Choice("good", "GOOD", "1"), Choice("bad", "BAD", "2")),
)

__all__ = ["FLUENCY", "INFORMATIVENESS", "QUALITY"]
