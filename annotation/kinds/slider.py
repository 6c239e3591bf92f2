"""The 0-100 slider kind: AVA-Captions informativeness as a score (seed 000)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Kind, VoteInvalid


@dataclass(frozen=True)
class SliderKind(Kind):
    """A 0-100 score (AVA-Captions informativeness as a slider). Labels for agreement are the
    score itself (interval metric); dynamic overlap uses the good/bad side of 50."""

    minimum: int = 0
    maximum: int = 100
    scale: str = "interval"

    widget = "slider"
    label_field = "score"
    default_method = "mean"
    scored = True

    @property
    def numeric(self) -> bool:
        return True

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

    # --- the work page -----------------------------------------------------------------------
    def widget_context(self, task, value: dict, worker_id: int) -> dict:
        score = value.get("score")
        return {"slider": {"min": self.minimum, "max": self.maximum,
                           "value": score if isinstance(score, (int, float)) else (self.minimum + self.maximum) // 2}}

    def value_from_post(self, post, candidates: list | None):
        return post.get("score", "")

    def posted_value(self, post, candidates: list | None) -> dict:
        try:
            return {"score": float(post.get("score", ""))}
        except ValueError:
            return {}

    def display(self, value) -> list[str]:
        value = value if isinstance(value, dict) else {}
        return [f"{value.get('score')}"]

    def unsaved(self, value: dict) -> str:
        return ""


INFORMATIVENESS_SCORE = SliderKind(
    name="informativeness_score", label="Rate informativeness (0-100 slider)", target="caption", seed="000",
    description="How much does the comment tell about the picture, from 0 (nothing) to 100?",
    question="How much does the comment tell about the picture, from 0 (nothing) to 100?",
)

__all__ = ["SliderKind", "INFORMATIVENESS_SCORE"]
