"""Executing one chunk: its chunk-level steps in order over its images and captions, decisions streamed
into the database as they are made (the steps themselves and the state they accumulate: steps.py)."""
from __future__ import annotations

from django.db import connection, transaction

from ...models import Caption, FilterDecision, FilterRun
from ..base import Item
from .decisions import DecisionWriter, save_transformed
from .items import load_items
from .planning import instantiate
from .steps import ChunkState, run_steps

# --- Chunks ---------------------------------------------------------------------------------------
#
# A chunk's steps run in segments. A segment of steps that all declare ``per_item`` (each item's
# decision depends on that item alone, and ``apply`` uses no database) runs on sub-batches of about
# SUB_BATCH_CAPTIONS captions, and the decisions of each sub-batch are sent into an open COPY on the
# chunk's own transaction as soon as they are made: PostgreSQL inserts them (and updates the indexes)
# on its own core while this process computes the next sub-batch. Other steps run over the whole
# chunk, as one batch. Texts are parsed only when a step needs a decision about them that is not known
# yet. For steps decided by the text alone, a decision's values (outcome, score, reason, details JSON,
# ...) are built once per distinct text and kept per worker process, so a duplicate caption costs one
# tuple per decision.

SUB_BATCH_CAPTIONS = 256


def process_chunk(run: FilterRun, image_ids: list[int], *, first_attempt: bool = False,
                  overrides: dict | None = None, texts: dict | None = None, transforms: dict | None = None) -> int:
    """Run the chunk-level steps over some images and their captions; returns the items processed.
    ``first_attempt``: the caller knows that no attempt at these images has committed before (a chunk's
    decisions commit together with its being done, and a done chunk is never claimed again), so the
    decisions go straight into the table without asking the database whether some are there already
    (with the image ids from every earlier run of the collection in the index, that lookup costs more
    than the chunk's own queries). ``overrides`` ({step: {(image, caption or None): outcome}}):
    what curators decided, which the steps honour (an item a curator kept goes on to the next step).
    ``texts`` ({step: {(image, caption): text}}): texts people set at transform steps, which go on in
    place of the filters' (a verified rewrite's fix). ``transforms``, when given, receives {caption id:
    [(step, new text)]} of the surviving captions (the chains of transformed captions saved)."""
    filters = instantiate(run)
    images, captions = load_items(image_ids)
    state = ChunkState(run, filters)
    state.overrides = overrides or None
    state.texts = texts or None
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
    direct = connection.vendor == "postgresql" and (first_attempt or not has_decisions(run, image_ids))
    alive_images = dict(images)
    alive_captions = list(captions)
    with transaction.atomic(), DecisionWriter(direct) as writer:
        for per_item, segment in segments:
            if per_item and writer.direct and len(alive_captions) > SUB_BATCH_CAPTIONS:
                next_images: dict[int, Item] = {}
                next_captions: list[Item] = []
                for batch_images, batch_captions in _sub_batches(alive_images, alive_captions):
                    batch_images, batch_captions = run_steps(state, segment, batch_images, batch_captions)
                    next_images.update(batch_images)
                    next_captions.extend(batch_captions)
                    writer.stream(state.rows)  # PostgreSQL inserts these while the next batch is computed
                    state.rows = []
                alive_images, alive_captions = next_images, next_captions
            else:
                writer.pause()  # the steps below may use the database connection
                alive_images, alive_captions = run_steps(state, segment, alive_images, alive_captions)
        writer.finish(state.rows)
        for it in captions:
            it.doc = None
        save_transformed(run, {it.caption_id: it for it in alive_captions}, state.transforms, captions)
        if state.seeds:  # CaptionSeed rows and the seed captions (origin "seed") of the kept descriptions
            from ..seed_captions import save_chunk_seeds

            save_chunk_seeds(run, state.seeds)
    if transforms is not None:
        transforms.update({it.caption_id: list(state.transforms.get(it.caption_id, ())) for it in alive_captions})
    return len(images) + len(captions)


def has_decisions(run: FilterRun, image_ids: list[int]) -> bool:
    """Whether the run has a decision about any of these images: one of their own (the partial index on
    image-level rows) or one of their captions' (through the captions, by the caption_id index: the
    decisions have no index on image_id over every row). The ids go as one array parameter: an IN list
    of thousands of placeholders costs more to build than the lookup."""
    decisions, captions = FilterDecision._meta.db_table, Caption._meta.db_table
    ids = list(image_ids)
    if connection.vendor != "postgresql":  # SQLite, the embedded default: the same question through the ORM
        from ...models import decisions_of_images

        return FilterDecision.objects.filter(decisions_of_images(ids), run=run).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {decisions} WHERE run_id = %s AND caption_id IS NULL "  # noqa: S608
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
