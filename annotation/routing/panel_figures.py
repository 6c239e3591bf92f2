"""The figures every task panel shows, in one statement: the worker's votes (done), the open items
they have not voted on (remaining), their time in the campaign, and whether Undo has a vote to
re-open.

Asked with the ORM these were four queries per submit-and-next (the worker's vote counts, the
campaign's open items, the membership's seconds, the undoable vote), whose building cost more of
the web process's CPU than PostgreSQL spent running them (benchmarks/annotate_load.py). Here they
are one prepared statement over the worker's own votes (the vote table's (campaign, worker) index),
so the cost follows the worker's votes, not the campaign's size. The campaign's open items come
from ``services.open_real_tasks``'s cache when it holds them; otherwise they are counted in the
same statement and a large campaign's count is cached as there.
"""
from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from ..models import Campaign, Membership, Task, Vote, Worker
from .hotsql import hot_cursor, prepared_sql


def _figures_sql(count_open: bool) -> str:
    vote, task, member = (m._meta.db_table for m in (Vote, Task, Membership))
    real, gold, open_ = Task.Role.REAL.value, Task.Role.GOLD.value, Task.Status.OPEN.value
    open_all = (f""", (SELECT COUNT(*) FROM {task} a
                   WHERE a.campaign_id = %(campaign)s AND a.role = '{real}' AND a.status = '{open_}')"""  # noqa: S608
                if count_open else "")
    return f"""
        SELECT mine.done, mine.open_voted, mine.undoable,
               (SELECT m.seconds FROM {member} m WHERE m.campaign_id = %(campaign)s AND m.worker_id = %(worker)s)
               {open_all}
        FROM (
            SELECT COUNT(*) FILTER (WHERE v.role IN ('{real}', '{gold}')) AS done,
                   COUNT(*) FILTER (WHERE v.role = '{real}' AND t.status = '{open_}') AS open_voted,
                   COUNT(*) FILTER (WHERE v.role IN ('{real}', '{gold}') AND v.created_at > %(cutoff)s) AS undoable
            FROM {vote} v JOIN {task} t ON t.id = v.task_id
            WHERE v.campaign_id = %(campaign)s AND v.worker_id = %(worker)s
        ) mine
    """  # noqa: S608


def panel_figures(campaign: Campaign, worker: Worker) -> dict:
    """{done, remaining, seconds, undoable} for the worker's panel. ``undoable``: a vote inside the
    edit window that Undo can re-open, as ``routing.last_editable_vote`` finds them."""
    from django.core.cache import cache

    from .. import services

    key = services.open_count_key(campaign.pk)
    cached_open = cache.get(key)
    cutoff = timezone.now() - timedelta(seconds=campaign.edit_window_seconds)
    params = {"campaign": campaign.pk, "worker": worker.pk,
              "cutoff": connection.ops.adapt_datetimefield_value(cutoff)}
    name = "panel_figures" if cached_open is not None else "panel_figures_open"
    with hot_cursor() as cursor:
        cursor.execute(prepared_sql(name, lambda: _figures_sql(cached_open is None)), params)
        row = cursor.fetchone()
    done, open_voted, undoable, seconds = row[0] or 0, row[1] or 0, row[2] or 0, row[3] or 0
    if cached_open is None:
        cached_open = row[4] or 0
        if cached_open > services.OPEN_COUNT_CACHED_ABOVE:
            cache.set(key, cached_open, timeout=services.OPEN_COUNT_SECONDS)
    return {"done": done, "remaining": max(cached_open - open_voted, 0), "seconds": seconds,
            "undoable": undoable > 0}
