"""Writing results: aggregate rows, per-worker reliabilities and the campaign's stats.

Lock discipline (the vote path locks a worker's membership, then the campaign row):
- passes over one campaign are serialised by a PostgreSQL *advisory* lock on the campaign id,
  which no vote ever takes, instead of ``SELECT ... FOR UPDATE`` on the campaign row;
- the computation holds no row lock at all; results are written at the end in short statements:
  the aggregate rows (which the vote path never locks), then the memberships' reliabilities in
  one transaction of its own, then the campaign's stats in a single ``UPDATE`` (autocommit), so a
  pass never holds a campaign lock while waiting for a membership, or the other way round.
"""
from __future__ import annotations

import contextlib
import json

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from ..models import Aggregate, Campaign, Membership

BATCH = 2000
LOCK_NAMESPACE = 23_001  # first key of pg_advisory_lock(int, int): "campaign aggregation"

UPSERT_SQL = """
INSERT INTO {table} (task_id, part, method, label, confidence, n_votes, details, updated_at)
SELECT t, p, m, l::jsonb, c, n, d::jsonb, %s
FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::double precision[], %s::int[], %s::text[])
     AS x(t, p, m, l, c, n, d)
ON CONFLICT (task_id, part, method) DO UPDATE SET
    label = EXCLUDED.label, confidence = EXCLUDED.confidence, n_votes = EXCLUDED.n_votes,
    details = EXCLUDED.details, updated_at = EXCLUDED.updated_at
"""


@contextlib.contextmanager
def campaign_lock(campaign_id: int, wait: bool = True):
    """Yields True while this process holds the campaign's aggregation lock (False when ``wait``
    is off and another pass holds it). Session-level, released on exit (or when the connection
    dies): a PostgreSQL advisory lock, so it blocks other aggregation passes and nothing else."""
    if connection.vendor != "postgresql":
        yield True
        return
    with connection.cursor() as cursor:
        if wait:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, campaign_id])
            got = True
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, campaign_id])
            got = bool(cursor.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, campaign_id])


def upsert(rows: dict, now) -> None:
    """Insert or update aggregate rows. On PostgreSQL one ``unnest`` statement per batch of 10,000
    (building 100k model instances costs more than the database work); elsewhere
    ``bulk_create(update_conflicts=True)``."""
    if connection.vendor == "postgresql":
        items = list(rows.items())
        with connection.cursor() as cursor:
            for i in range(0, len(items), 10000):
                chunk = items[i:i + 10000]
                cursor.execute(UPSERT_SQL.format(table=connection.ops.quote_name(Aggregate._meta.db_table)), [
                    now, [k[0] for k, _ in chunk], [k[1] for k, _ in chunk], [k[2] for k, _ in chunk],
                    [None if v[0] is None else json.dumps(v[0]) for _, v in chunk], [v[1] for _, v in chunk],
                    [v[2] for _, v in chunk], [json.dumps(v[3]) for _, v in chunk]])
        return
    objs = [Aggregate(task_id=task, part=part, method=method, label=label, confidence=conf, n_votes=n,
                      details=details, updated_at=now)
            for (task, part, method), (label, conf, n, details) in rows.items()]
    for i in range(0, len(objs), BATCH):
        Aggregate.objects.bulk_create(objs[i:i + BATCH], update_conflicts=True,
                                      unique_fields=["task", "part", "method"],
                                      update_fields=["label", "confidence", "n_votes", "details", "updated_at"])


def replace_rows(rows: dict, stale) -> None:
    """Upsert ``rows`` and delete the rows of ``stale`` (an Aggregate queryset: the scope the pass
    recomputed) that it did not write, in one short transaction."""
    with transaction.atomic():
        started = timezone.now()
        upsert(rows, started)
        stale.filter(updated_at__lt=started).delete()


def write_reliability(campaign: Campaign, workers: list[dict]) -> None:
    """Dawid-Skene reliabilities onto the memberships (only those that changed), in a transaction
    that touches memberships only."""
    members = {m.worker_id: m for m in Membership.objects.filter(campaign=campaign, blocked=False)
               .only("pk", "worker_id", "reliability")}
    changed = []
    for row in workers:
        member = members.get(row["worker"])
        if member is not None and member.reliability != row["reliability"]:
            member.reliability = row["reliability"]
            changed.append(member)
    changed.sort(key=lambda m: m.worker_id)  # the app's lock order: memberships in ascending worker id
    if changed:
        Membership.objects.bulk_update(changed, ["reliability"], batch_size=BATCH)


def set_stats(campaign_id: int, stats: dict) -> None:
    """The campaign's stats, replaced in a single UPDATE."""
    Campaign.objects.filter(pk=campaign_id).update(stats=stats, stats_updated_at=timezone.now())


MERGE_SQL = """
UPDATE {table} SET
    stats = (COALESCE(stats, '{{}}'::jsonb) || %s::jsonb) || jsonb_build_object('label_distribution',
            (COALESCE(stats -> 'label_distribution', '{{}}'::jsonb) - %s::text[]) || %s::jsonb),
    stats_updated_at = %s
WHERE id = %s
"""


def merge_stats(campaign_id: int, top: dict, labels: dict, replaced_methods) -> None:
    """Merge keys into the stats in a single UPDATE: ``top`` replaces top-level keys, ``labels``
    replaces the label distributions of ``replaced_methods`` (those of the model-based methods,
    written by the last full pass, stay)."""
    now = timezone.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(MERGE_SQL.format(table=connection.ops.quote_name(Campaign._meta.db_table)),
                           [json.dumps(top), list(replaced_methods), json.dumps(labels), now, campaign_id])
        return
    with transaction.atomic():  # other databases: read, merge, write
        stats = Campaign.objects.filter(pk=campaign_id).values_list("stats", flat=True).first() or {}
        stats.update(top)
        dist = {m: d for m, d in (stats.get("label_distribution") or {}).items() if m not in replaced_methods}
        dist.update(labels)
        stats["label_distribution"] = dist
        Campaign.objects.filter(pk=campaign_id).update(stats=stats, stats_updated_at=now)


def per_task_scope(task_ids, methods):
    return Aggregate.objects.filter(Q(task_id__in=list(task_ids)) & Q(method__in=list(methods)))
