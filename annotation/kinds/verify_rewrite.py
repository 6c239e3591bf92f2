"""The verify_rewrite kind: keep, fix or drop a rewrite hypernymization was unsure of (seed 002)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from curation.models import FilterDecision

from .base import Choice, Kind, VoteInvalid, check_typed_text

_QUOTED = re.compile(r"""^(['"])(.+?)\1""")


# --- showing -------------------------------------------------------------------------------------

def mentions(uncertain) -> list[str]:
    """The mention texts quoted at the start of each ``details["uncertain"]`` reason
    ("'Giza' taken for a person: ..." -> "Giza")."""
    found = []
    for reason in uncertain or []:
        match = _QUOTED.match(str(reason))
        if match and match.group(2) not in found:
            found.append(match.group(2))
    return found


def highlighted(text: str, words: list[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, is a mention) pieces, for the template to escape and mark."""
    if not words:
        return [(text, False)]
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)
    pieces, last = [], 0
    for match in pattern.finditer(text):
        if match.start() > last:
            pieces.append((text[last:match.start()], False))
        pieces.append((match.group(0), True))
        last = match.end()
    if last < len(text):
        pieces.append((text[last:], False))
    return pieces


def rewrite_of(task) -> dict | None:
    """{"decision", "original", "rewrite", "uncertain", "pieces"} of a task's source decision (None without one)."""
    if task.source_decision is None:
        return None
    row = (FilterDecision.objects.filter(pk=task.source_decision)
           .values("pk", "text_before", "text_after", "details").first())
    if row is None:
        return None
    details = row["details"] or {}
    verified = details.get("verified") or {}
    rewrite = verified.get("original_rewrite") or row["text_after"]  # what the filter wrote, not a fix
    uncertain = [str(u) for u in details.get("uncertain") or []]
    original = row["text_before"] or (task.caption.text if task.caption_id else "")
    return {"decision": row["pk"], "original": original, "rewrite": rewrite, "uncertain": uncertain,
            "pieces": highlighted(original, mentions(uncertain))}


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

__all__ = ["VerifyRewriteKind", "VERIFY_REWRITE", "rewrite_of", "mentions", "highlighted"]
