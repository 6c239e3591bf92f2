"""Per-item results of a campaign: the one selector behind the results page, its CSV, JSON and
Parquet exports, the API (``annotation.web.curator.api_results``) and ``manage.py campaign_results``, so the
four show the same rows with the same columns.

A row is one item: a task (or, for candidate kinds, one candidate caption and dimension of a task)
with

- ``votes``: the votes the aggregation counts (real, not quarantined, not from a rejected
  assignment or a blocked worker), and ``vote_counts`` (JSON) per label, counted here from the
  votes themselves;
- ``consensus``, ``confidence`` and ``method``: the stored aggregate (``Aggregate`` rows written by
  the aggregation) of the method asked for; for a write campaign the best caption of the image
  chosen by its rating campaign (``annotation.best_caption``);
- ``tie``: whether the top labels have equal vote counts. It is computed here from the votes, not
  read from the aggregation, so it holds whatever the aggregation stores. A majority label of a
  tied item is shown as no consensus unless the aggregation says which tie-break rule chose it
  (``details["tie_break"]``): the first label of a tie is an accident of ordering, not a result.

Filters (``ResultFilters``) narrow the rows: consensus value, ties only, a minimum of votes, a
confidence range, and a text search over the item's caption, the consensus and the image id.
"""
from __future__ import annotations

import io
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.core.paginator import Paginator
from django.db.models.fields.json import KT

from captionlab.gcpause import cyclic_gc_paused

from .best_caption import best_captions
from .models import Aggregate, Campaign, Task
from .result_votes import counted_votes, is_tie, vote_counts

COLUMNS = ("task_id", "part", "image_id", "image_external_id", "caption_id", "caption_text", "votes",
           "consensus", "confidence", "tie", "method", "vote_counts", "consensus_caption_id")
WRITE_METHODS = ("bradley_terry", "mean_rating", "rover")
# What the table shows when the curator does not choose: the simplest figure to read back to the votes.
PREFERRED = ("majority", "mean", "dawid_skene", "consistent", "glad", "mace", "bradley_terry")


class ResultsError(ValueError):
    """A filter or option the results cannot use; ``field`` names it for the form and the API."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.message, self.field = message, field


@dataclass(frozen=True)
class ResultFilters:
    consensus: str = ""
    tie_only: bool = False
    min_votes: int | None = None
    confidence_min: float | None = None
    confidence_max: float | None = None
    search: str = ""

    def keep(self, row: dict) -> bool:
        if self.consensus and (row["consensus"] or "") != self.consensus:
            return False
        if self.tie_only and not row["tie"]:
            return False
        if self.min_votes is not None and row["votes"] < self.min_votes:
            return False
        conf = row["confidence"]
        if self.confidence_min is not None and (conf is None or conf < self.confidence_min):
            return False
        if self.confidence_max is not None and (conf is None or conf > self.confidence_max):
            return False
        if self.search:
            needle = self.search.casefold()
            haystack = " ".join(str(row[c] or "") for c in ("caption_text", "consensus", "image_external_id"))
            if needle not in haystack.casefold():
                return False
        return True

    @property
    def active(self) -> bool:
        return self != ResultFilters()


def _number(raw: str, field: str, cast, lo=None, hi=None, what="a number"):
    try:
        value = cast(raw)
    except (TypeError, ValueError):
        raise ResultsError(f"“{raw}” is not {what}.", field) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ResultsError(f"“{raw}” is not {what}.", field)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ResultsError(f"{field.replace('_', ' ').capitalize()} must be between {lo} and {hi}.", field)
    return value


def parse_filters(params) -> ResultFilters:
    """Filters from a query string (the page, the API) or the command's options; a bad value is a
    ``ResultsError`` naming the parameter."""
    def get(name):
        value = params.get(name)
        return "" if value is None else str(value).strip()

    tie = get("tie").lower()
    if tie not in ("", "0", "1", "true", "false", "yes", "no", "on"):
        raise ResultsError("tie is true or false.", "tie")
    filters = ResultFilters(
        consensus=get("consensus")[:500],
        tie_only=tie in ("1", "true", "yes", "on"),
        min_votes=_number(get("min_votes"), "min_votes", int, 0, 10_000, "a whole number") if get("min_votes") else None,
        confidence_min=_number(get("confidence_min"), "confidence_min", float) if get("confidence_min") else None,
        confidence_max=_number(get("confidence_max"), "confidence_max", float) if get("confidence_max") else None,
        search=get("q")[:200],
    )
    if (filters.confidence_min is not None and filters.confidence_max is not None
            and filters.confidence_min > filters.confidence_max):
        raise ResultsError("The confidence range is empty: the lowest is above the highest.", "confidence_min")
    return filters


# --- which method -------------------------------------------------------------------------------

def methods_of(campaign: Campaign) -> list[str]:
    """The methods the table can show for this campaign."""
    if campaign.kind_spec.written:
        return list(WRITE_METHODS)
    # The aggregation lists its methods in the stats; before its first full pass, ask the aggregates
    # (one EXISTS per method: a DISTINCT over every aggregate row took a second at 200,000 tasks).
    stored = set((campaign.stats or {}).get("methods") or [])
    if not stored:
        stored = {m for m in PREFERRED if Aggregate.objects.filter(task__campaign=campaign, method=m).exists()}
    return [m for m in PREFERRED if m in stored] + sorted(stored - set(PREFERRED))


def resolve_method(campaign: Campaign, method: str | None) -> str:
    available = methods_of(campaign)
    if method:
        if method not in available:
            offered = ", ".join(available) or "none yet (aggregate the campaign first)"
            raise ResultsError(f"Unknown method {method!r} for this campaign; choose one of: {offered}.", "method")
        return method
    if available:
        return available[0]
    return campaign.kind_spec.default_method


def tie_break_text(campaign: Campaign) -> str:
    """The campaign's tie-break rule in words, for the results page (``provider_config["tie_break"]``,
    the setting the aggregation's majority vote follows)."""
    rule = (campaign.provider_config or {}).get("tie_break") or "report"
    if rule == "random":
        return "a tied majority takes one of the tied labels, drawn reproducibly per item"
    if isinstance(rule, str) and rule.startswith("prefer:"):
        return f"a tied majority takes “{rule[len('prefer:'):]}” when it is one of the tied labels"
    return "a tied majority has no label: the item is reported as a tie"


# --- the rows -----------------------------------------------------------------------------------

def _label_text(label) -> str | None:
    if label is None:
        return None
    if isinstance(label, (dict, list)):
        return json.dumps(label, ensure_ascii=False, sort_keys=True)
    if isinstance(label, float) and label.is_integer():
        return str(int(label)) if abs(label) < 1e15 else str(label)
    return str(label)


def _task_order(campaign: Campaign):
    return campaign.tasks.filter(role=Task.Role.REAL).order_by("position", "pk")


def _tasks(campaign: Campaign, task_ids=None) -> list[dict]:
    tasks = _task_order(campaign)
    if task_ids is not None:
        tasks = tasks.filter(pk__in=task_ids)
    return list(tasks.values(
        "pk", "image_id", "image__external_id", "caption_id", "caption__text", "votes_count"))


def results_rows(campaign: Campaign, *, method: str | None = None, filters: ResultFilters | None = None,
                 task_ids=None) -> tuple[str, list[dict]]:
    """(the method shown, the rows in task order) after the filters. Every value is a plain
    JSON type, so the three exports and the page read the same values."""
    method = resolve_method(campaign, method)
    filters = filters or ResultFilters()
    with _no_cyclic_gc():
        if campaign.kind_spec.written:
            rows = _write_rows(campaign, method, task_ids)
        else:
            rows = _rated_rows(campaign, method, task_ids)
        return method, [row for row in rows if filters.keep(row)]


_no_cyclic_gc = cyclic_gc_paused  # see captionlab/gcpause.py for why


def _row(task: dict, part: str, votes: int, consensus, confidence, tie: bool, method: str, counts: dict,
         consensus_caption_id=None, caption_id=None, caption_text=None) -> dict:
    return {
        "task_id": task["pk"], "part": part, "image_id": task["image_id"],
        "image_external_id": task["image__external_id"] or "",
        "caption_id": task["caption_id"] if caption_id is None else caption_id,
        "caption_text": (task["caption__text"] or "") if caption_text is None else caption_text,
        "votes": int(votes), "consensus": consensus,
        "confidence": None if confidence is None or not math.isfinite(confidence) else round(float(confidence), 6),
        "tie": bool(tie), "method": method,
        "vote_counts": json.dumps(dict(sorted(counts.items())), ensure_ascii=False),
        "consensus_caption_id": consensus_caption_id,
    }


def _rated_rows(campaign: Campaign, method: str, task_ids=None) -> list[dict]:
    tasks = _tasks(campaign, task_ids)
    counts = vote_counts(campaign, task_ids)
    aggregates = Aggregate.objects.filter(task__campaign=campaign, method=method)
    if task_ids is not None:
        aggregates = aggregates.filter(task_id__in=task_ids)
    stored: dict[tuple[int, str], tuple] = {
        (task, part): (label, confidence, tie_break) for task, part, label, confidence, tie_break
        in aggregates.order_by().values_list(
            "task_id", "part", "label", "confidence", KT("details__tie_break"))}
    parts_of: dict[int, set[str]] = defaultdict(set)
    for task_id, part in list(counts) + list(stored):
        parts_of[task_id].add(part)
    caption_texts = _candidate_texts(campaign, parts_of)
    rows = []
    for task in tasks:
        for part in sorted(parts_of.get(task["pk"]) or {""}):
            counter = counts.get((task["pk"], part), Counter())
            aggregate = stored.get((task["pk"], part))
            numeric = method in ("mean", "bradley_terry")
            tie = is_tie(counter) and not numeric
            consensus, confidence = None, None
            if aggregate is not None:
                label, confidence, tie_break = aggregate
                consensus = _label_text(label)
                if tie and method == "majority" and not tie_break:
                    consensus = None
            caption_id, caption_text = None, None
            if ":" in part:  # a candidate caption of the task and one dimension
                cid = part.split(":", 1)[0]
                caption_id = int(cid) if cid.isdigit() else None
                caption_text = caption_texts.get(caption_id, "")
            rows.append(_row(task, part, sum(counter.values()), consensus, confidence, tie, method, counter,
                             caption_id=caption_id, caption_text=caption_text))
    return rows


def _candidate_texts(campaign, parts_of) -> dict[int, str]:
    from curation.models import Caption

    ids = {int(p.split(":", 1)[0]) for parts in parts_of.values() for p in parts
           if ":" in p and p.split(":", 1)[0].isdigit()}
    return dict(Caption.objects.filter(pk__in=ids).values_list("pk", "text")) if ids else {}


def _write_rows(campaign: Campaign, method: str, task_ids=None) -> list[dict]:
    """One row per image of a write campaign: how many captions were written and the best one."""
    tasks = _tasks(campaign, task_ids)
    written = Counter(counted_votes(campaign).filter(caption__isnull=False).values_list("task_id", flat=True))
    best = best_captions(campaign, method)
    rows = []
    for task in tasks:
        choice = best.get(task["pk"])
        if choice is None:
            rows.append(_row(task, "", written.get(task["pk"], 0), None, None, False, method, {},
                             caption_id=None, caption_text=""))
            continue
        rows.append(_row(task, "", written.get(task["pk"], 0), choice.text or None, choice.confidence, choice.tie,
                         choice.method, choice.counts, consensus_caption_id=choice.caption_id,
                         caption_id=None, caption_text=""))
    return rows


def results_page(campaign: Campaign, *, method: str | None = None, filters: ResultFilters | None = None,
                 page: str | int | None = 1, per_page: int = 50):
    """(method, a Paginator page of rows, number of rows) for the results page. Without filters
    only the page's tasks are read (a page costs the same at 200,000 tasks as at 1,000); a filter
    needs every row of the campaign, so it reads them all."""
    filters = filters or ResultFilters()
    if filters.active:
        method, rows = results_rows(campaign, method=method, filters=filters)
        return method, Paginator(rows, per_page).get_page(page), len(rows)
    if campaign.kind_spec.target != "caption":
        # candidate kinds have a row per caption and dimension; write kinds rank over every image
        method, rows = results_rows(campaign, method=method)
        return method, Paginator(rows, per_page).get_page(page), len(rows)
    tasks = Paginator(_task_order(campaign).values_list("pk", flat=True), per_page).get_page(page)
    method, rows = results_rows(campaign, method=method, task_ids=list(tasks.object_list))
    tasks.object_list = rows
    return method, tasks, tasks.paginator.count


# --- the exports --------------------------------------------------------------------------------

FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json",
           "parquet": "application/vnd.apache.parquet"}


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def csv_lines(rows: list[dict]):
    """The CSV, line by line, through the platform's one CSV writer (formulas neutralised)."""
    from captionlab import csv_safe

    header = [list(COLUMNS)]
    body = ([_csv_cell(row[c]) for c in COLUMNS] for row in rows)
    return csv_safe.stream(_chain(header, body))


def _chain(*iterables):
    for it in iterables:
        yield from it


def to_json(campaign: Campaign, method: str, rows: list[dict]) -> bytes:
    return json.dumps({"campaign": campaign.pk, "kind": campaign.kind, "method": method, "columns": list(COLUMNS),
                       "rows": [{c: row[c] for c in COLUMNS} for row in rows]},
                      ensure_ascii=False, indent=1).encode("utf-8")


def parquet_schema():
    import pyarrow as pa

    return pa.schema([
        ("task_id", pa.int64()), ("part", pa.string()), ("image_id", pa.int64()),
        ("image_external_id", pa.string()), ("caption_id", pa.int64()), ("caption_text", pa.string()),
        ("votes", pa.int32()), ("consensus", pa.string()), ("confidence", pa.float64()), ("tie", pa.bool_()),
        ("method", pa.string()), ("vote_counts", pa.string()), ("consensus_caption_id", pa.int64()),
    ])


def to_parquet(campaign: Campaign, method: str, rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema().with_metadata({"campaign": str(campaign.pk), "kind": campaign.kind, "method": method})
    table = pa.Table.from_pylist([{c: row[c] for c in COLUMNS} for row in rows], schema=schema)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def export_bytes(campaign: Campaign, fmt: str, method: str, rows: list[dict]) -> bytes:
    """The whole file in one format (the page streams CSV instead; the bytes are the same)."""
    if fmt == "csv":
        return "".join(csv_lines(rows)).encode("utf-8")
    if fmt == "json":
        return to_json(campaign, method, rows)
    if fmt == "parquet":
        return to_parquet(campaign, method, rows)
    raise ResultsError(f"Unknown format {fmt!r}; choose csv, json or parquet.", "format")


def filename(campaign: Campaign, fmt: str) -> str:
    return f"campaign-{campaign.pk}-results.{fmt}"


__all__ = ["COLUMNS", "FORMATS", "ResultFilters", "ResultsError", "parse_filters", "results_rows", "results_page", "methods_of",
           "resolve_method", "tie_break_text", "counted_votes", "vote_counts", "is_tie", "csv_lines", "to_json", "to_parquet",
           "export_bytes", "filename"]
