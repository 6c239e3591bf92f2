"""Reservations that end without a vote: expired ones swept back to the pool (Celery beat, and
routing itself when it finds nothing to claim), and a task the worker gives back (skip). Each
task under its row lock, as every change to its counters.

A swept reservation leaves a note in the cache for a day (``was_expired``): a vote that arrives
after the sweep is then known to answer a task that was served to this worker, and may take a free
slot of it (``submitting``); a task never served to the worker stays refused.
"""
from __future__ import annotations

import logging
from collections import defaultdict

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from ..models import Campaign, Reservation, Task, Worker

log = logging.getLogger(__name__)

EXPIRED_NOTE_SECONDS = 86400


def _note_key(task_id: int, worker_id: int) -> str:
    return f"annotation:expired:{task_id}:{worker_id}"


def mark_expired(pairs) -> None:
    """Remember that these (task, worker) reservations expired. A cache that is down only costs
    the late votes of these workers their second chance."""
    if not pairs:
        return
    try:
        cache.set_many({_note_key(t, w): 1 for t, w in pairs}, timeout=EXPIRED_NOTE_SECONDS)
    except Exception:
        log.exception("could not note %d expired reservations", len(pairs))


def was_expired(task_id: int, worker_id: int) -> bool:
    """Whether this worker held this task until their reservation expired and was swept."""
    try:
        return bool(cache.get(_note_key(task_id, worker_id)))
    except Exception:
        log.exception("could not read the expiry note of task %s", task_id)
        return False


def sweep_expired(campaign: Campaign | None = None, *, now=None) -> int:
    """Return expired reservations' tasks to the pool; the number released."""
    now = now or timezone.now()
    expired = Reservation.objects.filter(expires_at__lte=now)
    if campaign is not None:
        expired = expired.filter(campaign=campaign)
    holders = defaultdict(list)
    for task_id, worker_id in expired.values_list("task_id", "worker_id")[:5000]:
        holders[task_id].append(worker_id)
    released = 0
    for task_id in sorted(holders):
        with transaction.atomic():
            task = Task.objects.select_for_update(no_key=True).filter(pk=task_id).first()
            if task is None:
                continue
            n, _ = Reservation.objects.filter(task_id=task_id, expires_at__lte=now).delete()
            if n and task.role == Task.Role.REAL:
                Task.objects.filter(pk=task_id).update(reserved_count=max(task.reserved_count - n, 0))
            released += n
    mark_expired([(t, w) for t, workers in holders.items() for w in workers])
    return released


def release(campaign: Campaign, worker: Worker, task_id: int) -> bool:
    """The worker gives a reserved task back (skip)."""
    with transaction.atomic():
        task = Task.objects.select_for_update(no_key=True).filter(pk=task_id, campaign=campaign).first()
        if task is None:
            return False
        n, _ = Reservation.objects.filter(task=task, worker=worker).delete()
        if n and task.role == Task.Role.REAL:
            Task.objects.filter(pk=task.pk).update(reserved_count=max(task.reserved_count - n, 0))
    return bool(n)
