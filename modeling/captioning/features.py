"""The feature cache: a frozen encoder's features of a release's images, computed once per (release, encoder
version, preprocessing) and read by every later captioner run on them.

``cache_build(cache_id)`` is the batched job (the ``modeling.cache_features`` task on the ``gpu`` queue, or inline
from a training run that finds no cache): images decoded by DataLoader workers, encoded under autocast on CUDA,
written as safetensors shards in storage (``pooled`` [n, Dp] and ``grid`` [n, N, Dg], fp16; the shard's image
keys in its metadata). The row is claimed with a conditional UPDATE and beats while it works; a worker that died
leaves its finished shards, and the next claim (once the heartbeat is stale) writes only the shards missing.
Images that cannot be read are listed on the row (``missing``) and left out of the shards: the run decides, by
its ``missing_images`` option, whether that fails it.

``cache_read(cache)`` loads the shards into CPU tensors (pinned when they go to a GPU).
"""
from __future__ import annotations

import contextlib
import json
import struct
import time
from datetime import timedelta

import torch
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from captionlab import tasks
from modeling.trainers.base import TrainingError

from . import pretrained
from .image_loader import image_batches

STORAGE_DIR = "modeling/features"
SHARD_IMAGES = 1024  # images per shard: what a killed worker can lose
STALE_AFTER = timedelta(minutes=2)
BEAT_EVERY = 10.0  # seconds between heartbeats within a shard
WAIT_SECONDS = 6 * 3600  # how long a run waits for another worker's cache of the same features


def cache_for(release, row, settings: dict, digest: str):
    """The FeatureCache row of (release, model, preprocessing), created queued when there is none."""
    from modeling.models import FeatureCache

    try:
        with transaction.atomic():
            cache, _ = FeatureCache.objects.get_or_create(release=release, model=row, preprocessing=digest,
                                                          defaults={"settings": settings})
    except IntegrityError:  # created meanwhile by another worker
        cache = FeatureCache.objects.get(release=release, model=row, preprocessing=digest)
    return cache


def release_images(release) -> list[tuple[str, str]]:
    """[(image key, storage name)] of the release's distinct images, in release order (every split)."""
    from releases.models import ReleaseItem

    seen: dict[str, str] = {}
    items = ReleaseItem.objects.filter(release=release).order_by("position").values_list("image_sha256", "image_file")
    for sha, name in items:
        seen.setdefault(sha or name, name or "")
    return list(seen.items())


def _claim(cache_id: int, device: str) -> bool:
    """Take the row for this worker: queued, failed, or running with a stale heartbeat. Exactly one wins."""
    from modeling.models import FeatureCache

    now = timezone.now()
    stale = Q(status=FeatureCache.Status.RUNNING) & (Q(heartbeat_at__isnull=True)
                                                     | Q(heartbeat_at__lt=now - STALE_AFTER))
    free = Q(status__in=[FeatureCache.Status.QUEUED, FeatureCache.Status.FAILED]) | stale
    return FeatureCache.objects.filter(free, pk=cache_id).update(
        status=FeatureCache.Status.RUNNING, heartbeat_at=now, device=device[:40], error="") == 1


def cache_build(cache_id: int, *, batch_size: int = 64, workers: int | None = None, device: str | None = None):
    """Compute what the cache lacks (see the module docstring); returns the row. A row another worker holds with a
    fresh heartbeat is returned as it is (status running)."""
    from modeling.models import FeatureCache

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not _claim(cache_id, device):
        return FeatureCache.objects.get(pk=cache_id)
    cache = FeatureCache.objects.select_related("model", "release").get(pk=cache_id)
    started = time.monotonic()
    try:
        _compute(cache, batch_size, workers, device)
    except Exception as exc:
        FeatureCache.objects.filter(pk=cache.pk).update(status=FeatureCache.Status.FAILED,
                                                        error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    FeatureCache.objects.filter(pk=cache.pk).update(
        status=FeatureCache.Status.DONE, finished_at=timezone.now(), heartbeat_at=timezone.now(),
        seconds=(cache.seconds or 0.0) + time.monotonic() - started)
    cache.refresh_from_db()
    return cache


def shard_name(cache, index: int) -> str:
    return f"{STORAGE_DIR}/release-{cache.release_id}/cache-{cache.pk}/shard-{index:05d}.safetensors"


def _compute(cache, batch_size, workers, device) -> None:
    from modeling.models import FeatureCache

    settings = cache.settings or {}
    processor = pretrained.processor_for(cache.model, int(settings.get("image_size") or 0))
    encoder = pretrained.PretrainedEncoder(pretrained.load_pack(cache.model, device).model,
                                           bool(settings.get("image_size"))).eval()
    images = release_images(cache.release)
    written, missing = list(cache.shards or []), list(cache.missing or [])
    FeatureCache.objects.filter(pk=cache.pk).update(images=len(images))
    for index, start in enumerate(range(0, len(images), SHARD_IMAGES)):
        name = shard_name(cache, index)
        chunk = images[start:start + SHARD_IMAGES]
        if name in written:
            continue
        tensors, keys, failed = _encode_chunk(cache, encoder, processor, chunk, start, batch_size, workers, device)
        stored = save_shard(name, tensors, keys)
        written.append(stored)
        missing += [m for m in failed if m not in missing]
        FeatureCache.objects.filter(pk=cache.pk).update(
            shards=written, missing=missing, done=min(len(images), start + len(chunk)), heartbeat_at=timezone.now(),
            pooled_dim=int(tensors["pooled"].shape[-1]), grid_shape=list(tensors["grid"].shape[1:]))


def encode_batch(encoder, values, device: str):
    """(pooled, grid) of one batch, fp16 on the CPU. Autocast (bf16 where supported, else fp16) on CUDA."""
    autocast = contextlib.nullcontext()
    if device == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        autocast = torch.autocast("cuda", dtype=dtype)
    with torch.inference_mode(), autocast:
        pooled, grid = encoder(values.to(device, non_blocking=True))
    return pooled.to("cpu", torch.float16), grid.to("cpu", torch.float16)


def _encode_chunk(cache, encoder, processor, chunk, offset, batch_size, workers, device):
    from modeling.models import FeatureCache

    names = [name for _, name in chunk]
    pooled, grid, keys, failed = [], [], [], []
    beat = time.monotonic()
    for index, values, errors in image_batches(names, processor, batch_size=batch_size, workers=workers,
                                               pin=device == "cuda"):
        failed += [error for _, error in errors]
        if values is not None:
            p, g = encode_batch(encoder, values, device)
            pooled.append(p)
            grid.append(g)
            keys += [chunk[int(i)][0] for i in index]
        if time.monotonic() - beat > BEAT_EVERY:
            beat = time.monotonic()
            done = offset + int(index.max()) + 1 if len(index) else offset
            FeatureCache.objects.filter(pk=cache.pk).update(heartbeat_at=timezone.now(), done=done)
    if not pooled:  # every image of the shard missing: an empty shard keeps the shard numbering
        return {"pooled": torch.zeros(0, 0, dtype=torch.float16),
                "grid": torch.zeros(0, 0, 0, dtype=torch.float16)}, keys, failed
    return {"pooled": torch.cat(pooled), "grid": torch.cat(grid)}, keys, failed


def save_shard(name: str, tensors: dict, keys: list[str]) -> str:
    from safetensors.torch import save

    from modeling.registry import save_storage

    data = save({k: v.contiguous() for k, v in tensors.items()}, metadata={"keys": json.dumps(keys)})
    return save_storage(name, data)


# --- reading -------------------------------------------------------------------------------------------------


def _metadata(data: bytes) -> dict:
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length]).get("__metadata__") or {}


def cache_read(cache, pin: bool = False):
    """({image key: row}, pooled [N, Dp] fp16, grid [N, R, Dg] fp16) from the cache's shards."""
    from safetensors.torch import load

    from modeling.registry import read_storage

    index: dict[str, int] = {}
    pooled, grid = [], []
    for name in cache.shards or []:
        data = read_storage(name, f"A shard of feature cache #{cache.pk}")
        keys = json.loads(_metadata(data).get("keys") or "[]")
        if not keys:
            continue
        tensors = load(data)
        for key in keys:
            index[key] = len(index)
        pooled.append(tensors["pooled"])
        grid.append(tensors["grid"])
    if not pooled:
        raise TrainingError(f"Feature cache #{cache.pk} holds no image: every image of the release is missing.",
                            code="missing_images")
    pooled, grid = torch.cat(pooled), torch.cat(grid)
    if pin and torch.cuda.is_available():
        pooled, grid = pooled.pin_memory(), grid.pin_memory()
    return index, pooled, grid


# --- a run's cache ---------------------------------------------------------------------------------------------


def cache_ensure(cache, *, batch_size: int = 64, workers: int | None = None, wait: float = WAIT_SECONDS, log=None):
    """The cache, complete: built here when no one is building it, awaited while another worker's heartbeat is
    fresh. A finished cache that listed missing images which are back in storage is rebuilt."""
    from django.core.files.storage import default_storage

    from modeling.models import FeatureCache

    cache.refresh_from_db()
    if cache.status == FeatureCache.Status.DONE and any(name and default_storage.exists(name.split(" (")[0])
                                                        for name in cache.missing or []):
        cache_reset(cache)
        if log:
            log("images missing when the feature cache was built are back in storage: rebuilding it")
    deadline = time.monotonic() + wait
    while cache.status != FeatureCache.Status.DONE:
        if log and cache.status != FeatureCache.Status.RUNNING:
            log(f"computing the features of {cache.release} with {cache.model.key} (cache #{cache.pk})")
        cache = cache_build(cache.pk, batch_size=batch_size, workers=workers)
        if cache.status == FeatureCache.Status.RUNNING:
            if time.monotonic() > deadline:
                raise TrainingError(f"Feature cache #{cache.pk} is still being computed by another worker.",
                                    code="cache_busy")
            time.sleep(2.0)
            cache.refresh_from_db()
    return cache


def cache_reset(cache) -> None:
    """Forget a cache's shards (deleted from storage) so it is computed again."""
    from django.core.files.storage import default_storage

    from modeling.models import FeatureCache

    for name in cache.shards or []:
        if default_storage.exists(name):
            default_storage.delete(name)
    FeatureCache.objects.filter(pk=cache.pk).update(status=FeatureCache.Status.QUEUED, shards=[], missing=[], done=0,
                                                    error="", finished_at=None)
    cache.refresh_from_db()


def cache_request(*, release, encoder: str, image_size: int = 0):
    """The cache of ``release``'s features by the pack model ``encoder``, queued on the ``gpu`` queue (after commit)
    unless it is done: so the features are ready before the first run asks for them."""
    row = pretrained.model_row(encoder)
    settings, digest = pretrained.preprocessing(row, pretrained.processor_for(row, image_size), image_size)
    cache = cache_for(release, row, settings, digest)
    if cache.status != cache.Status.DONE:
        transaction.on_commit(lambda: tasks.enqueue("modeling.cache_features", cache.pk))
    return cache
