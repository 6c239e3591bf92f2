"""A chunk's items: its images and their captions, loaded with as few statements as possible."""
from __future__ import annotations

import json

from django.db import connection, transaction

from ...models import Caption, Image
from ..base import Item

SKIP_ORIGINS = (Caption.Origin.TRANSFORMED, Caption.Origin.SEED)  # what runs make: never judged as raw text


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
    for pk, image_id, text, language in caption_rows:
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
                .values_list("pk", "image_id", "text", "language"))
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
            f"SELECT {', '.join(image_columns[:-1])}, metadata::text FROM {Image._meta.db_table} "  # noqa: S608
            f"WHERE id BETWEEN %s AND %s{members.format('id')}", [low, high, *member_args])
        image_rows = cursor.fetchall()
        cursor.execute(
            f"SELECT id, image_id, text, language FROM {Caption._meta.db_table} "  # noqa: S608
            f"WHERE image_id BETWEEN %s AND %s{members.format('image_id')} AND NOT (origin = ANY(%s)) "
            "ORDER BY id", [low, high, *member_args, list(SKIP_ORIGINS)])
        caption_rows = cursor.fetchall()
        cursor.execute("RESET enable_seqscan")
    return image_rows, caption_rows
