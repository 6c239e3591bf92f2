"""The write kind: a caption for an image (Flickr8k-style, seed 001)."""
from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import strip_tags

from .base import Kind, VoteInvalid, check_typed_text


@dataclass(frozen=True)
class WriteKind(Kind):
    """Write a caption for an image (Flickr8k-style: several independent captions per image)."""

    scale: str = "text"
    default_votes: int = 5

    widget = "write"
    editable = False  # a written caption stays as written; the next image takes a new one
    example_gold = True  # a training item's gold caption is an example, not the one right answer
    shows_caption = False
    written = True

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
        check_typed_text(text, campaign, what="The caption", text_checks=text_checks)
        return {"text": text}

    def label_of(self, value):
        return None

    def parts(self, value):
        return {}

    def is_correct(self, value, gold_value, tolerance: float = 0.0) -> bool:
        return True

    # --- the work page -----------------------------------------------------------------------
    def widget_context(self, task, value: dict, worker_id: int) -> dict:
        return {"text": value.get("text", "")}

    def value_from_post(self, post, candidates: list | None):
        text = post.get("text", "")
        if text.strip() and not any(ch.isalpha() for ch in strip_tags(text)):
            raise VoteInvalid("The caption holds only HTML markup: describe the image in words.")
        return {"text": text}

    def posted_value(self, post, candidates: list | None) -> dict:
        return {"text": post.get("text", "")}

    def display(self, value) -> list[str]:
        value = value if isinstance(value, dict) else {}
        return [value.get("text", "")]

    def unsaved(self, value: dict) -> str:
        return (value.get("text") or "").strip()

    # --- the JSON API --------------------------------------------------------------------------
    def _caption_payload(self, task) -> dict | None:
        return None  # the image is the task; a caption is what the worker writes


WRITE = WriteKind(
    name="write", label="Write a caption", target="image", seed="001",
    description="Describe the image in one sentence: who or what is there, what they are doing, where "
                "(the Flickr8k protocol: several independent captions per image).",
    question="Describe the image in one sentence: who or what is there, what they are doing, and where.",
)

__all__ = ["WriteKind", "WRITE"]
