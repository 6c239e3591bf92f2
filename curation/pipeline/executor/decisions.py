"""Writing decisions: rows of column values, streamed into the table with psycopg's COPY on PostgreSQL
(``copy.write_row``), inserted with ``bulk_create`` elsewhere; the transformed captions a run makes."""
from __future__ import annotations

import json
import numbers
from typing import NamedTuple

import orjson
from django.db import connection, transaction
from django.db.models import Q

from ...models import Caption, FilterDecision, text_hash
from ..base import DROP, KEEP, NA, Decision, Item
from .planning import PipelineError

# --- Decision rows ----------------------------------------------------------------------------------
#
# A decision row is a tuple of DECISION_COLUMNS' values: the item's own columns (run, image, caption)
# first, then its "tail" (step, filter, outcome, score, reason, details as JSON text, text before and
# after, override), so that one decision's tail serves every item with its text.

DECISION_COLUMNS = ("run_id", "image_id", "caption_id", "step", "filter_name", "outcome", "score", "reason",
                    "details", "text_before", "text_after", "override")
_OUTCOMES = frozenset((KEEP, DROP, NA))
_stdlib_json = json.JSONEncoder(separators=(",", ":"), default=str).encode
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _json_default(value):
    """What orjson does not encode itself: number subclasses as numbers, anything else as its text."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def details_json(details) -> str:
    """A decision's details as compact JSON text (orjson: a decision costs a tenth of the standard
    encoder's time). Non-finite numbers become null (jsonb has no NaN); integers beyond 64 bits, which
    orjson refuses, go through the standard encoder."""
    if not details:
        return "{}"
    try:
        return orjson.dumps(details, default=_json_default, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return _stdlib_json(details)


def decision_tail(position: int, step: dict, decision: Decision, before: str, removed_spans) -> tuple:
    """The decision's values from ``step`` on (the item's run, image and caption go before them)."""
    outcome = decision.outcome
    if outcome not in _OUTCOMES:
        raise PipelineError(f"{step['filter']} returned the outcome {outcome!r}")
    score = None if decision.score is None else float(decision.score)
    details = decision.details
    if step["transform"]:
        if removed_spans:
            details = {**(details or {}), "removed_spans": [list(span) for span in removed_spans]}
        texts = (before, decision.text or "")
    else:
        texts = ("", "")
    return (position, step["filter"], outcome, score, (decision.reason or "")[:60], details_json(details), *texts, "")


_DECISION_COPY = f"COPY {FilterDecision._meta.db_table} ({', '.join(DECISION_COLUMNS)}) FROM STDIN"
# The dumpers of DECISION_COLUMNS' values, fixed once per COPY: psycopg then formats a row in about half the
# time it takes to choose a dumper per value. The details go as text, which the server reads as jsonb.
_COPY_TYPES = ("int8", "int8", "int8", "int2", "text", "text", "float8", "text", "text", "text", "text", "text")


class DecisionWriter:
    """Writes a chunk's decision rows. ``direct``: one COPY into the decisions table stays open while
    the per-item steps run, and each sub-batch's rows are sent as soon as they are made: sending does
    not wait for PostgreSQL, which inserts them (and updates the indexes) on its own core while this
    process computes the next sub-batch. ``pause`` ends the COPY (waiting for what was sent), so that
    the connection can run other statements. Otherwise (a re-delivered chunk, or not PostgreSQL)
    everything is written at ``finish`` through ``write_decisions``, which skips decisions already there."""

    def __init__(self, direct: bool):
        self.direct = direct
        self.pending: list[tuple] = []
        self._cursor = None
        self._copying = None  # the open COPY's context manager
        self._copy = None

    def __enter__(self):
        return self

    def stream(self, rows: list[tuple]) -> None:
        if not self.direct:
            self.pending.extend(rows)
            return
        if not rows:
            return
        if self._copy is None:
            connection.ensure_connection()
            self._cursor = connection.connection.cursor()
            self._copying = self._cursor.copy(_DECISION_COPY)
            self._copy = self._copying.__enter__()
            self._copy.set_types(_COPY_TYPES)
        write_row = self._copy.write_row
        for row in rows:
            write_row(row)

    def pause(self) -> None:
        copying, cursor = self._copying, self._cursor
        self._copying = self._copy = self._cursor = None
        if copying is not None:
            try:
                copying.__exit__(None, None, None)
            finally:
                cursor.close()

    def finish(self, rows: list[tuple]) -> None:
        if self.direct:
            self.stream(rows)
            self.pause()
        else:
            write_decisions(self.pending + rows)
            self.pending = []

    def __exit__(self, exc_type, exc, tb):
        copying, cursor = self._copying, self._cursor
        self._copying = self._copy = self._cursor = None
        if copying is not None:  # an error: abort the COPY before the transaction rolls back
            try:
                copying.__exit__(exc_type, exc, tb)
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
            finally:
                cursor.close()
        return False


def write_decisions(rows: list[tuple]) -> None:
    """Insert decision rows (``DECISION_COLUMNS``' values) once each (unique per run, step and target). On
    PostgreSQL they are COPYed into a staging table and moved with ``INSERT ... ON CONFLICT DO NOTHING``:
    a chunk writes (steps x items) rows, and the ORM's per-row cost would otherwise dominate a run;
    elsewhere (SQLite, the embedded default) ``bulk_create``."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        FilterDecision.objects.bulk_create([_decision(row) for row in rows], batch_size=2000, ignore_conflicts=True)
        return
    stage = "captionlab_decision_stage"
    columns = ", ".join(DECISION_COLUMNS)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} (run_id bigint, image_id bigint, caption_id bigint, "
            "step smallint, filter_name text, outcome text, score double precision, reason text, details text, "
            "text_before text, text_after text, override text) ON COMMIT DELETE ROWS")
        with cursor.copy(f"COPY {stage} ({columns}) FROM STDIN") as copy:
            copy.set_types(_COPY_TYPES)
            for row in rows:
                copy.write_row(row)
        cursor.execute(
            f"INSERT INTO {FilterDecision._meta.db_table} ({columns}) "  # noqa: S608
            f"SELECT run_id, image_id, caption_id, step, filter_name, outcome, score, reason, details::jsonb, "
            f"text_before, text_after, override FROM {stage} ON CONFLICT DO NOTHING")
        # Emptied now, not only at the commit: a second write in the same transaction (reconcile's, after
        # decisions were taken back in between) must not insert these rows again.
        cursor.execute(f"TRUNCATE {stage}")


def _decision(row: tuple) -> FilterDecision:
    values = dict(zip(DECISION_COLUMNS, row))
    values["details"] = json.loads(values["details"])
    return FilterDecision(**values)


def save_transformed(run, survivors: dict[int, Item], transforms, captions: list[Item]):
    """A surviving caption that a transform changed gets its new text as a child Caption; a chain
    of transforms makes a chain of captions (raw -> cropped -> hypernymized). Idempotent: a chunk run
    again finds the children it made (captions are unique per image, text and source)."""
    originals = {it.caption_id: it for it in captions}
    chains = {cid: steps for cid, steps in transforms.items() if cid in survivors}
    depth = 0
    parents = {cid: cid for cid in chains}
    insert = _insert_children if connection.vendor == "postgresql" else _insert_children_orm
    while True:
        level = [(cid, steps[depth]) for cid, steps in chains.items() if len(steps) > depth]
        if not level:
            return
        rows = []
        for cid, (position, text) in level:
            name = run.snapshot[position]["filter"]
            rows.append(_Child(originals[cid].image_id, text, text_hash(text), originals[cid].language, parents[cid],
                               f"run {run.pk}: {name}"[:300], {"run": run.pk, "step": position, "filter": name}))
        found = insert(rows)
        for (cid, _), row in zip(level, rows):
            parents[cid] = found.get(row.key, parents[cid])
        depth += 1


class _Child(NamedTuple):
    """A transformed caption to insert; ``key`` is its unique key (image, text hash, source)."""

    image_id: int
    text: str
    text_hash: str
    language: str
    parent_id: int
    source: str
    metadata: dict

    @property
    def key(self) -> tuple:
        return self.image_id, self.text_hash, self.source


def _insert_children(rows: list[_Child]) -> dict[tuple, int]:
    """PostgreSQL: insert the child captions with one statement (arrays of values, ON CONFLICT DO NOTHING)
    and return {(image id, text hash, source): caption id}, looking up only those that were there
    already (a re-run chunk). The ORM's bulk_create and a lookup by IN lists cost 50 ms per 2,000."""
    table = Caption._meta.db_table
    image_ids, texts, hashes, languages, parent_ids, sources, metadata = (list(c) for c in zip(*rows))
    metadata = [orjson.dumps(m).decode() for m in metadata]
    found: dict[tuple, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (image_id, text, text_hash, language, origin, parent_id, source, external_id, "  # noqa: S608
            "metadata, created_at) "
            "SELECT i, t, h, l, %s, p, s, '', m::jsonb, now() FROM unnest(%s::bigint[], %s::text[], %s::text[], "
            "%s::text[], %s::bigint[], %s::text[], %s::text[]) AS u(i, t, h, l, p, s, m) "
            "ON CONFLICT DO NOTHING RETURNING id, image_id, text_hash, source",
            [Caption.Origin.TRANSFORMED, image_ids, texts, hashes, languages, parent_ids, sources, metadata])
        for pk, image_id, digest, source in cursor.fetchall():
            found[(image_id, digest, source)] = pk
        missing = [row.key for row in rows if row.key not in found]
        if missing:
            cursor.execute(
                f"SELECT c.id, c.image_id, c.text_hash, c.source FROM {table} c "  # noqa: S608
                "JOIN unnest(%s::bigint[], %s::text[], %s::text[]) AS u(i, h, s) "
                "ON c.image_id = u.i AND c.text_hash = u.h AND c.source = u.s",
                [list(column) for column in zip(*missing)])
            for pk, image_id, digest, source in cursor.fetchall():
                found[(image_id, digest, source)] = pk
    return found


def _insert_children_orm(rows: list[_Child]) -> dict[tuple, int]:
    """``_insert_children`` through the ORM (SQLite, the embedded default)."""
    Caption.objects.bulk_create([Caption(origin=Caption.Origin.TRANSFORMED, **row._asdict()) for row in rows],
                                batch_size=1000, ignore_conflicts=True)
    return {
        (c["image_id"], c["text_hash"], c["source"]): c["pk"]
        for c in Caption.objects.filter(
            Q(image_id__in={r.image_id for r in rows}) & Q(source__in={r.source for r in rows})
        ).values("pk", "image_id", "text_hash", "source")
    }
