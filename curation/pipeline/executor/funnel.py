"""The funnel (what entered each step, kept, dropped), counted over the run's decisions, its lock and its
warnings."""
from __future__ import annotations

from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Count, Value
from django.db.models.functions import Coalesce, NullIf

from ...models import FilterDecision, FilterRun
from ..base import DROP, KEEP, NA

# The class (first key) of the PostgreSQL advisory locks that serialise the writers of a run's funnel.
FUNNEL_LOCK_CLASS = 0x434C46  # "CLF"


@contextmanager
def funnel_lock(*run_ids: int):
    """A transaction in which no other writer of these runs' funnels runs: finalising a run (the funnel
    counted over its decisions) and overriding decisions (a review, then a recount). Without it an override
    committed while finalise reads could be missed by the funnel it saves, and two overrides' recounts could
    be saved in the wrong order. On PostgreSQL a transaction-level
    advisory lock per run (chunks, which update the run's row as they finish, do not wait for it);
    SQLite, the embedded default, runs one writer at a time anyway."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                for run_id in sorted(set(run_ids)):  # one order for everyone: no deadlock
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [FUNNEL_LOCK_CLASS, run_id % 2**31])
        yield


def _funnel_rows(run: FilterRun, counts: dict[int, dict[str, int]]) -> list[dict]:
    funnel = []
    for position, step in enumerate(run.snapshot):
        c = {KEEP: 0, DROP: 0, NA: 0, **counts.get(position, {})}
        entered = c[KEEP] + c[DROP] + c[NA]
        funnel.append({"step": position, "filter": step["filter"], "label": step.get("label", step["filter"]),
                       "target": step["target"], "entered": entered, "kept": c[KEEP], "dropped": c[DROP],
                       "not_applicable": c[NA], "warning": step_warning(entered, c[DROP])})
    return funnel


# A step that drops this share of what entered it (or everything) is flagged on the run's page, in the
# funnel, and in ``run_pipeline``'s output: usually a threshold set for another kind of collection (the
# papers' web-scale numbers on a first small collection, capitalisation rules on lower-case alt-text).
STEP_WARNING_SHARE = 0.9


def step_warning(entered: int, dropped: int) -> str:
    """The warning for a step that ``dropped`` of the ``entered`` items, or ""."""
    if not entered or dropped < STEP_WARNING_SHARE * entered:
        return ""
    if dropped >= entered:
        return f"dropped all {entered} items that entered: nothing goes on to the next step"
    return (f"dropped {dropped} of {entered} items that entered ({100 * dropped / entered:.1f}%): check its "
            "parameters against this collection")


def with_warnings(funnel: list[dict] | None) -> list[dict]:
    """The funnel's rows, each with its "warning" ("" when none; computed for funnels stored before
    warnings were kept)."""
    return [row if "warning" in row else {**row, "warning": step_warning(row.get("entered", 0), row.get("dropped", 0))}
            for row in funnel or []]


def funnel_warnings(funnel: list[dict] | None) -> list[dict]:
    """The funnel's rows that carry a warning."""
    return [row for row in with_warnings(funnel) if row["warning"]]


def compute_funnel(run: FilterRun) -> list[dict]:
    """Per step: how many items entered it and how many it kept, dropped, or found not applicable,
    counting curator overrides as the final word (one GROUP BY over the run's decisions)."""
    counts: dict[int, dict[str, int]] = {}
    final = Coalesce(NullIf("override", Value("")), "outcome")
    for row in (FilterDecision.objects.filter(run=run).annotate(final=final).values("step", "final")
                .annotate(n=Count("pk"))):
        counts.setdefault(row["step"], {})[row["final"]] = row["n"]
    return _funnel_rows(run, counts)
