"""The same_meaning kind: two captions shown side by side, "do they say the same thing?" Its items are the
candidate pairs of a run's semantic-duplicates step (``annotation.same_meaning``), and its answers calibrate
that step's score and threshold."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Choice, Kind


@dataclass(frozen=True)
class SameMeaningKind(Kind):
    """A pair of captions (``task.candidates``: the two caption ids, in the order the run found them); the vote
    is one of the choices, ``{"label": "same" | "different" | "unsure"}``."""

    widget = "pair"
    shows_caption = False  # the widget shows both captions

    def pair(self, task) -> list:
        from curation.models import Caption

        ids = [int(c) for c in task.candidates or []]
        captions = Caption.objects.in_bulk(ids)
        return [captions[c] for c in ids if c in captions]

    def widget_context(self, task, value: dict, worker_id: int) -> dict:
        return {"options": self._checked_options(value), "pair": self.pair(task)}

    def _caption_payload(self, task) -> dict | None:
        return None  # the captions are the pair, in ``candidates``


SAME_MEANING = SameMeaningKind(
    name="same_meaning", label="Same meaning? (caption pairs)", target="pair",
    description="Two captions that the semantic-duplicates step found close: do they say the same thing about "
                "a picture? The answers fit the step's score and threshold (precision and recall on the judged "
                "pairs); an item needs two judges who agree (ties and single judges are reported, not used).",
    question="Do these two captions say the same thing about a picture?",
    choices=(Choice("same", "Same meaning", "1"), Choice("different", "Different meaning", "2"),
             Choice("unsure", "Can't tell", "3")),
    default_votes=3,
)

__all__ = ["SameMeaningKind", "SAME_MEANING"]
