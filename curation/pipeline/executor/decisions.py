"""Writing decisions: COPY lines built once per distinct decision, streamed into the table, or staged and
inserted once each; the transformed captions a run makes."""
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

# COPY columns: the item's own first, so that one decision's text serves every item with its text.
_DECISION_COLUMNS = ("run_id", "image_id", "caption_id", "step", "filter_name", "outcome", "score", "reason",
                     "details", "text_before", "text_after", "override")
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
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


def _json(details) -> str:
    """A decision's details as compact JSON text (orjson: a decision costs a tenth of the standard
    encoder's time). Non-finite numbers become null (jsonb has no NaN); integers beyond 64 bits, which
    orjson refuses, go through the standard encoder."""
    try:
        return orjson.dumps(details, default=_json_default, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return _stdlib_json(details)


def _copy_text(value: str) -> str:
    """A value in COPY's text format (``str.translate`` looks each character up in a dict: most values
    have nothing to escape, which four scans find faster)."""
    if not value:
        return ""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


def _copy_number(value) -> str:
    if value is None:
        return "\\N"
    value = float(value)
    if value != value:
        return "NaN"
    if value in (_INF, -_INF):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


_INF = float("inf")
_OUTCOMES = frozenset((KEEP, DROP, NA))
_REASONS: dict[str, str] = {}  # reason -> its COPY text (reasons are short codes: few distinct)


def _decision_tail(position: int, step: dict, decision: Decision, before: str, removed_spans) -> str:
    """The decision's COPY line from ``step`` on (the item's run, image and caption go before it)."""
    head = f"{position}\t{step['filter']}\t"
    if not step["transform"]:
        return _plain_tail(head, decision, step)
    details = decision.details
    if removed_spans:
        details = {**(details or {}), "removed_spans": [list(span) for span in removed_spans]}
    return (f"{head}{_tail_fields(decision, details, step)}{_copy_text(before)}\t"
            f"{_copy_text(decision.text or '')}\t\n")


def _plain_tail(head: str, decision: Decision, step: dict) -> str:
    """``_decision_tail`` of a step that is not a transform; ``head``: the step's position and filter
    name as COPY text. Most decisions recur: few outcomes, reasons and scores per step, and small
    details of words and counts. One whose score is a number or None and whose details' values are
    strings or integers takes its text from a bounded memo."""
    key = _plain_key(head, decision)
    found = None if key is None else _PLAIN_TAILS.get(key)
    if found is None:
        found = f"{head}{_tail_fields(decision, decision.details, step)}\t\t\n"
        if key is not None:
            if len(_PLAIN_TAILS) >= 50_000:
                _PLAIN_TAILS.clear()
            _PLAIN_TAILS[key] = found
    return found


def _plain_key(head: str, decision: Decision) -> tuple | None:
    """The memo key of a decision's tail, or None when it is not memoised. Keys keep apart what compares
    equal but reads differently: 0.0 and -0.0, 1 and 1.0, True and 1."""
    score = decision.score
    kind = type(score)
    if score is None or (kind is float and score):
        score_key = score
    elif kind is float or kind is int:
        score_key = repr(score)
    else:
        return None
    details = decision.details
    if not details:
        return (head, decision.outcome, decision.reason, score_key)
    for value in details.values():
        kind = type(value)
        if kind is not str and kind is not int:
            return None
    return (head, decision.outcome, decision.reason, score_key, tuple(details.items()))


_PLAIN_TAILS: dict[tuple, str] = {}


def _tail_fields(decision: Decision, details, step: dict) -> str:
    """The outcome, score, reason and details columns, each followed by a tab."""
    outcome = decision.outcome
    if outcome not in _OUTCOMES:
        raise PipelineError(f"{step['filter']} returned the outcome {outcome!r}")
    score = decision.score
    if score is None:
        score = "\\N"
    elif type(score) is float and -_INF < score < _INF:
        score = repr(score)
    else:
        score = _copy_number(score)
    reason = decision.reason or ""
    escaped = _REASONS.get(reason)
    if escaped is None:
        escaped = _copy_text(reason[:60])
        if len(_REASONS) < 10_000:
            _REASONS[reason] = escaped
    if details:
        details = _json(details)  # control characters escaped: only backslashes need doubling
        if "\\" in details:
            details = details.replace("\\", "\\\\")
    else:
        details = "{}"
    return f"{outcome}\t{score}\t{escaped}\t{details}\t"


class _DecisionWriter:
    """Writes a chunk's decision lines. ``direct``: one COPY into the decisions table stays open while
    the per-item steps run, and each sub-batch's lines are sent as soon as they are made: sending does
    not wait for PostgreSQL, which inserts them (and updates the indexes) on its own core while this
    process computes the next sub-batch. ``pause`` ends the COPY (waiting for what was sent), so that
    the connection can run other statements. Otherwise (a re-delivered chunk, or not PostgreSQL)
    everything is written at ``finish`` through ``write_decision_lines``, which skips decisions
    already there."""

    def __init__(self, direct: bool):
        self.direct = direct
        self.pending: list[str] = []
        self._cursor = None
        self._copying = None  # the open COPY's context manager
        self._copy = None

    def __enter__(self):
        return self

    def stream(self, lines: list[str]) -> None:
        if not self.direct:
            self.pending.extend(lines)
            return
        if not lines:
            return
        if self._copy is None:
            connection.ensure_connection()
            self._cursor = connection.connection.cursor()
            self._copying = self._cursor.copy(_DECISION_COPY)
            self._copy = self._copying.__enter__()
        self._copy.write("".join(lines))

    def pause(self) -> None:
        copying, cursor = self._copying, self._cursor
        self._copying = self._copy = self._cursor = None
        if copying is not None:
            try:
                copying.__exit__(None, None, None)
            finally:
                cursor.close()

    def finish(self, lines: list[str]) -> None:
        if self.direct:
            self.stream(lines)
            self.pause()
        else:
            write_decision_lines(self.pending + lines)
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


_DECISION_COPY = f"COPY curation_filterdecision ({', '.join(_DECISION_COLUMNS)}) FROM STDIN"


def write_decisions(decisions: list[DecisionRow]) -> None:
    """Insert decisions once each (unique per run, step and target)."""
    write_decision_lines([_row_line(d) for d in decisions])


def write_decision_lines(lines: list[str]) -> None:
    """Insert decision lines (COPY text format, ``_DECISION_COLUMNS``) once each (unique per run, step and
    target). On PostgreSQL they are COPYed into a staging table and moved with ``INSERT ... ON CONFLICT
    DO NOTHING``: a chunk writes (steps x items) rows, and the ORM's per-row cost would otherwise
    dominate a run."""
    if not lines:
        return
    if connection.vendor != "postgresql":
        # A caption decided by a group of steps has one string of several rows (one per step); values never
        # hold a raw newline (COPY escapes it), so rows split at newlines.
        rows = [row for line in lines for row in line.split("\n") if row]
        FilterDecision.objects.bulk_create([_line_decision(row) for row in rows], batch_size=2000,
                                           ignore_conflicts=True)
        return
    stage = "captionlab_decision_stage"
    columns = ", ".join(_DECISION_COLUMNS)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} (run_id bigint, image_id bigint, caption_id bigint, "
            "step smallint, filter_name text, outcome text, score double precision, reason text, details text, "
            "text_before text, text_after text, override text) ON COMMIT DELETE ROWS")
        with cursor.copy(f"COPY {stage} ({columns}) FROM STDIN") as copy:
            for start in range(0, len(lines), 5000):
                copy.write("".join(lines[start:start + 5000]))
        cursor.execute(
            f"INSERT INTO curation_filterdecision ({columns}) "
            f"SELECT run_id, image_id, caption_id, step, filter_name, outcome, score, reason, details::jsonb, "
            f"text_before, text_after, override FROM {stage} ON CONFLICT DO NOTHING")
        # Emptied now, not only at the commit: a second write in the same transaction (reconcile's, after
        # decisions were taken back in between) must not insert these rows again.
        cursor.execute(f"TRUNCATE {stage}")


def _unescape(value: str):
    if value == "\\N":
        return None
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"t": "\t", "n": "\n", "r": "\r"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _line_decision(line: str) -> FilterDecision:
    """One decision row (a line without its newline) back as a model instance (databases without COPY)."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) != len(_DECISION_COLUMNS):
        raise PipelineError(f"a decision row has {len(fields)} fields, not {len(_DECISION_COLUMNS)}: {line[:200]!r}")
    values = dict(zip(_DECISION_COLUMNS, (_unescape(v) for v in fields)))
    values["details"] = json.loads(values["details"] or "{}")
    values["score"] = float(values["score"]) if values["score"] is not None else None
    for key in ("run_id", "image_id", "caption_id", "step"):
        values[key] = int(values[key]) if values[key] is not None else None
    return FilterDecision(**values)


class DecisionRow(NamedTuple):
    run_id: int
    step: int
    filter_name: str
    image_id: int
    caption_id: int | None
    outcome: str
    score: float | None
    reason: str
    details: str  # JSON text
    text_before: str
    text_after: str
    override: str = ""


def _row_line(d: DecisionRow) -> str:
    caption = "\\N" if d.caption_id is None else d.caption_id
    return (f"{d.run_id}\t{d.image_id}\t{caption}\t{d.step}\t{d.filter_name}\t{d.outcome}\t{_copy_number(d.score)}\t"
            f"{_copy_text(d.reason)}\t{_copy_text(d.details)}\t{_copy_text(d.text_before)}\t"
            f"{_copy_text(d.text_after)}\t{_copy_text(d.override)}\n")


def _decision_row(run, position, step, item: Item, decision: Decision, before: str) -> DecisionRow:
    if decision.outcome not in (KEEP, DROP, NA):
        raise PipelineError(f"{step['filter']} returned the outcome {decision.outcome!r}")
    details = decision.details or {}
    if item.removed_spans and step["transform"]:
        details = {**details, "removed_spans": [list(span) for span in item.removed_spans]}
    transform = step["transform"]
    return DecisionRow(
        run.pk, position, step["filter"], item.image_id, item.caption_id, decision.outcome, decision.score,
        (decision.reason or "")[:60], json.dumps(details, separators=(",", ":"), default=str),
        before if transform else "", (decision.text or "") if transform else "",
    )


def _save_transformed(run, survivors: dict[int, Item], transforms, captions: list[Item]):
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
            f"INSERT INTO {table} (image_id, text, text_hash, language, origin, parent_id, source, external_id, "
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
                f"SELECT c.id, c.image_id, c.text_hash, c.source FROM {table} c "
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
