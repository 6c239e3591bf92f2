"""The verify_rewrite kind: keep, fix or drop a rewrite hypernymization was unsure of (seed 002)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Choice, Kind, VoteInvalid, check_typed_text


@dataclass(frozen=True)
class VerifyRewriteKind(Kind):
    """Verify a rewrite a filter was unsure of (hypernymization's ``uncertain_rewrite``): the task's
    source decision holds the original caption (text_before) and the rewrite (text_after). The vote is
    ``{"label": "keep"}``, ``{"label": "drop"}`` or ``{"label": "fix", "text": "<the corrected rewrite>"}``;
    the label alone counts for agreement and dynamic overlap, the fixed texts are tallied when the
    verdicts are applied (``annotation.verify_rewrites``)."""

    widget = "verify"
    shows_caption = False  # the widget shows the original caption with its uncertain mentions marked

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
        check_typed_text(text, task.campaign, what="The corrected rewrite", text_checks=text_checks)
        return {"label": label, "text": text}

    # --- the work page -----------------------------------------------------------------------
    def widget_context(self, task, value: dict, worker_id: int) -> dict:
        from ..verify_rewrites import rewrite_of

        return {"options": self._checked_options(value), "rewrite": rewrite_of(task), "text": value.get("text") or ""}

    def value_from_post(self, post, candidates: list | None):
        label = post.get("label", "")
        if not label:
            raise VoteInvalid("Choose Keep, Fix or Drop first.")
        return {"label": label, "text": post.get("text", "")}

    def posted_value(self, post, candidates: list | None) -> dict:
        return {"label": post.get("label", ""), "text": post.get("text", "")}

    def display(self, value) -> list[str]:
        said = super().display(value)
        value = value if isinstance(value, dict) else {}
        return said + ([f"“{value['text']}”"] if value.get("text") else [])

    def unsaved(self, value: dict) -> str:
        return (value.get("text") or "").strip() or super().unsaved(value)

    # --- the JSON API --------------------------------------------------------------------------
    def task_payload(self, task, worker_id: int) -> dict:
        """Also the original, the rewrite to verify and why the filter was unsure."""
        from ..verify_rewrites import rewrite_of

        rewrite = rewrite_of(task) or {}
        return {**super().task_payload(task, worker_id),
                "rewrite": {k: rewrite.get(k) for k in ("original", "rewrite", "uncertain")}}


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

__all__ = ["VerifyRewriteKind", "VERIFY_REWRITE"]
