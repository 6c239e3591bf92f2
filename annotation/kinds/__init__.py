"""Campaign kinds: what a task shows, what a vote may hold, how it is posted, shown and aggregated.

A kind is a small object (``base.Kind``: the interface and the one-choice default); each kind lives
in a module of its own and is registered here by its name. A new kind is a new instance (or a small
subclass) and a widget template, never a copy of the pages, the API or the routing.

- ``choices``: fluency, informativeness good / bad, caption quality GOOD / BAD;
- ``slider``: informativeness as a 0-100 score;
- ``write``: write a caption for an image;
- ``candidates``: relevance and fluency 1-5, Good / Common / Bad, of several captions of one image;
- ``verify_rewrite``: keep, fix or drop an uncertain rewrite;
- ``same_meaning``: do two captions say the same thing (a run's candidate duplicate pairs).
"""
from __future__ import annotations

from .base import Choice, Kind, VoteInvalid, check_typed_text
from .candidates import GOOD_COMMON_BAD, RELEVANCE_FLUENCY, CandidatesKind
from .choices import FLUENCY, INFORMATIVENESS, QUALITY
from .same_meaning import SAME_MEANING, SameMeaningKind
from .slider import INFORMATIVENESS_SCORE, SliderKind
from .verify_rewrite import VERIFY_REWRITE, VerifyRewriteKind
from .write import WRITE, WriteKind

KINDS: dict[str, Kind] = {k.name: k for k in (WRITE, FLUENCY, INFORMATIVENESS, INFORMATIVENESS_SCORE, QUALITY,
                                               RELEVANCE_FLUENCY, GOOD_COMMON_BAD, VERIFY_REWRITE, SAME_MEANING)}
KIND_CHOICES = [(k.name, k.label) for k in KINDS.values()]


def get_kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise VoteInvalid(f"Unknown campaign kind {name!r}.") from None


__all__ = ["Kind", "Choice", "SliderKind", "WriteKind", "CandidatesKind", "VerifyRewriteKind", "SameMeaningKind", "KINDS", "KIND_CHOICES",
           "get_kind", "VoteInvalid", "check_typed_text", "WRITE", "FLUENCY", "INFORMATIVENESS",
           "INFORMATIVENESS_SCORE", "QUALITY", "RELEVANCE_FLUENCY", "GOOD_COMMON_BAD", "VERIFY_REWRITE",
           "SAME_MEANING"]
