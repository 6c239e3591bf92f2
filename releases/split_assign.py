"""Writing the splits onto a release's items: each image's items (a contiguous range of positions)
go to the split ``SplitPlan.assign`` gives the image; train is what bulk_create wrote, so only
val and test images are updated, with one UPDATE per batch of position ranges.
"""
from __future__ import annotations

from collections import defaultdict

from django.db import connection

from .splits import SplitPlan


def apply_splits(release, plan: SplitPlan, ranges: list[tuple[int, int]]) -> None:
    """Assign every image's items to its split (``ranges``: per image, its first and last position;
    the plan's payload is the first position)."""
    from releases.models import ReleaseItem

    config = release.config
    restricted = config["test_human_verified"] or config.get("include_model_captions", False)
    assigned = plan.assign(config["splits"], restricted)
    if not assigned:
        return
    ends = dict(ranges)
    hv = release.config["test_human_verified"]
    by_split = defaultdict(list)
    for first, split in assigned.items():
        by_split[split].append((first, ends[first]))
    table = ReleaseItem._meta.db_table
    for split, spans in by_split.items():
        spans.sort()
        for i in range(0, len(spans), 5000):
            batch = spans[i:i + 5000]
            only_verified = split == "test" and hv
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"UPDATE {table} AS t SET split = %s FROM unnest(%s::int[], %s::int[]) AS r(lo, hi) "  # noqa: S608
                        f"WHERE t.release_id = %s AND t.position BETWEEN r.lo AND r.hi"
                        + (" AND t.human_verified" if only_verified else ""),
                        [split, [a for a, _ in batch], [b for _, b in batch], release.pk])
            else:
                for lo, hi in batch:
                    qs = ReleaseItem.objects.filter(release=release, position__gte=lo, position__lte=hi)
                    if only_verified:
                        qs = qs.filter(human_verified=True)
                    qs.update(split=split)


__all__ = ["apply_splits"]
