"""Every vote of a campaign as rows: the one function behind the page's votes CSV
(``campaign-export?table=votes``) and ``manage.py campaign export-votes``, so both files have the
same columns and the same values. Cells are plain values; the caller writes them through
``captionlab.csv_safe``.
"""
from __future__ import annotations

import json

from django.db.models import Count

from .models import Campaign, Membership, Vote

VOTE_COLUMNS = ["vote", "task", "role", "image", "caption", "worker", "worker_name", "worker_blocked", "label",
                "value", "correct", "seconds", "edits", "created_at", "updated_at", "image_external_id",
                "caption_text", "quarantined"]


def vote_rows(campaign: Campaign):
    """The header, then one row per vote in vote order. ``label`` is the categorical label (or a
    slider's score, or a written caption's text); ``value`` the stored JSON; ``worker_blocked``
    and ``correct`` are 1/0 (``correct`` empty for items without an expected answer)."""
    kind = campaign.kind_spec
    blocked = set(Membership.objects.filter(campaign=campaign, blocked=True).values_list("worker_id", flat=True))
    yield list(VOTE_COLUMNS)
    votes = (Vote.objects.filter(campaign=campaign)
             .select_related("task__image", "task__caption", "worker__user")
             .annotate(n_edits=Count("edits")).order_by("pk"))
    for v in votes.iterator(chunk_size=2000):
        label = kind.label_of(v.value)
        if label is None and isinstance(v.value, dict) and "text" in v.value:
            label = v.value["text"]
        yield [v.pk, v.task_id, v.role, v.task.image_id, v.task.caption_id or "", v.worker_id, str(v.worker),
               int(v.worker_id in blocked or v.worker.blocked), "" if label is None else str(label),
               json.dumps(v.value, ensure_ascii=False, sort_keys=True),
               "" if v.correct is None else int(v.correct), f"{v.seconds:.3f}", v.n_edits,
               v.created_at.isoformat(), v.updated_at.isoformat(), v.task.image.external_id,
               v.task.caption.text if v.task.caption_id else "", int(v.quarantined)]


__all__ = ["VOTE_COLUMNS", "vote_rows"]
