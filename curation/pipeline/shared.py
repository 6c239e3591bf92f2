"""Decisions shared by the workers of a run, in Redis.

Each worker process keeps the entries of the texts it has decided (executor: ``_DECISION_CACHE``), so a
text that comes back in a later chunk costs a lookup instead of a parse. With several workers, a text
decided by one is decided again by every other that meets it: on a collection whose texts repeat across
chunks (web alt-text, photo-site comments), each worker warms its own cache, and two workers do up to
twice the parsing of one. This tier lets them share it.

* At the start of a run (``publish_repeated``) the texts that occur more than once in the collection are
  found in the database (captions' ``text_hash``, one grouped query) and their hashes put in a Redis set,
  at most ``FILTER_SHARED_DECISIONS_MAX_TEXTS`` of them: only texts that can come back are ever shared,
  so the tier's memory is bounded by the repeats, not by the collection.
* A chunk asks the set once which of its raw texts repeat (``RunShare.open``). For those its local
  cache does not know, it fetches what another worker has published (one HMGET per step group and
  sub-batch) and publishes what it decides itself (one HSET).
* Entries are JSON (never pickle: a worker does not run what it reads from Redis), under keys named
  after the run and its creation time (a database rebuilt with the same run ids never meets stale
  entries), with a TTL refreshed as the run goes on; ``forget`` deletes them when the run is finalised.
* Redis failing never fails a chunk: the worker logs it once, goes on with its own cache and tries Redis
  again a minute later. Without ``REDIS_URL`` (the embedded default, eager Celery in one process) or with
  ``FILTER_SHARED_DECISIONS=false`` the tier is off and nothing changes.

An entry is exactly what the worker would have computed (the same filters, parameters and artifacts:
the key holds the run and step), so a fetched entry gives the same decision lines; the tests compare
runs with and without the tier.
"""
from __future__ import annotations

import hashlib
import logging
import time

import orjson
from django.conf import settings

log = logging.getLogger(__name__)

TTL_SECONDS = 6 * 3600  # refreshed by every chunk; a crashed run's keys go away by themselves
REPEATED_BATCH = 10_000
_RETRY_AFTER = 60.0
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY

_client = None
_down_until = 0.0
STATS = {"fetched": 0, "published": 0}  # entries, this process: what the workers' logs and the benchmark show


def enabled() -> bool:
    return bool(settings.REDIS_URL) and settings.FILTER_SHARED_DECISIONS


def _redis():
    """The process's client, or None while Redis is off or failed in the last minute."""
    global _client
    if not enabled() or time.monotonic() < _down_until:
        return None
    if _client is None:
        import redis

        _client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=5)
    return _client


def _failed(exc: Exception) -> None:
    global _down_until, _client
    if time.monotonic() >= _down_until:
        log.warning("shared decisions: Redis failed (%s: %s); this worker goes on with its own cache and tries "
                    "again in %.0f s", type(exc).__name__, exc, _RETRY_AFTER)
    _down_until = time.monotonic() + _RETRY_AFTER
    _client = None


def namespace(run) -> str:
    created = int(run.created_at.timestamp() * 1_000_000) if run.created_at else 0
    return f"captionlab:filters:run:{run.pk}:{created}"


def short_hash(text_hash_hex: str) -> str:
    """The first 64 bits of a caption's sha256 ``text_hash``: a hint of repetition, not an identity."""
    return text_hash_hex[:16]


def _field(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def publish_repeated(run, text_hashes) -> int:
    """Put the hashes of the run's repeated texts in Redis (``text_hashes``: an iterable of sha256 hex).
    Returns how many were published (0 when the tier is off or Redis failed)."""
    client = _redis()
    if client is None:
        return 0
    key = f"{namespace(run)}:repeated"
    limit = settings.FILTER_SHARED_DECISIONS_MAX_TEXTS
    published = 0
    try:
        pipe = client.pipeline(transaction=False)
        pipe.delete(key)
        batch: list[str] = []
        for value in text_hashes:
            if published >= limit:
                break
            batch.append(short_hash(value))
            published += 1
            if len(batch) >= REPEATED_BATCH:
                pipe.sadd(key, *batch)
                batch = []
        if batch:
            pipe.sadd(key, *batch)
        pipe.expire(key, TTL_SECONDS)
        pipe.execute()
    except Exception as exc:  # noqa: BLE001 - the run goes on without the shared tier
        _failed(exc)
        return 0
    return published


def forget(run, positions: int) -> None:
    """Delete the run's shared keys (at its end)."""
    client = _redis()
    if client is None:
        return
    ns = namespace(run)
    keys = [f"{ns}:repeated", *(f"{ns}:{kind}:{p}" for p in range(positions) for kind in ("group", "keyed"))]
    try:
        client.delete(*keys)
    except Exception as exc:  # noqa: BLE001 - the TTL removes them
        _failed(exc)


class RunShare:
    """One chunk's handle on its run's shared decisions."""

    def __init__(self, client, ns: str):
        self.client = client
        self.ns = ns
        self.fetched = 0
        self.published = 0

    @classmethod
    def open(cls, run, text_hashes: list[str]) -> tuple[RunShare | None, list[bool]]:
        """The handle and, for each hash, whether its text repeats in the run; (None, all False) when the
        tier is off, the run published no repeats, or Redis failed."""
        client = _redis()
        if client is None or not text_hashes:
            return None, [False] * len(text_hashes)
        ns = namespace(run)
        key = f"{ns}:repeated"
        try:
            # EXPIRE answers whether the set exists (and refreshes it): a run of one chunk, or with no
            # repeated text, has none, and its chunk skips sending and parsing a flag per caption.
            if not client.expire(key, TTL_SECONDS):
                return None, [False] * len(text_hashes)
            flags = client.smismember(key, [short_hash(h) for h in text_hashes])
        except Exception as exc:  # noqa: BLE001
            _failed(exc)
            return None, [False] * len(text_hashes)
        flags = [bool(f) for f in flags]
        return (cls(client, ns) if any(flags) else None), flags

    def fetch(self, kind: str, position: int, texts: list[str], decode) -> dict[str, tuple]:
        """{text: entry} of what other workers published for these texts at this step."""
        if not texts or self.client is None:
            return {}
        try:
            values = self.client.hmget(f"{self.ns}:{kind}:{position}", [_field(t) for t in texts])
        except Exception as exc:  # noqa: BLE001
            _failed(exc)
            self.client = None
            return {}
        found = {}
        for text, value in zip(texts, values):
            if value is not None:
                found[text] = decode(orjson.loads(value))
        self.fetched += len(found)
        STATS["fetched"] += len(found)
        return found

    def publish(self, kind: str, position: int, entries: dict[str, tuple], encode) -> None:
        if not entries or self.client is None:
            return
        key = f"{self.ns}:{kind}:{position}"
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(key, mapping={_field(t): orjson.dumps(encode(e), default=str, option=_OPTIONS)
                                    for t, e in entries.items()})
            pipe.expire(key, TTL_SECONDS)
            pipe.execute()
        except Exception as exc:  # noqa: BLE001
            _failed(exc)
            self.client = None
            return
        self.published += len(entries)
        STATS["published"] += len(entries)


# --- Entries as JSON --------------------------------------------------------------------------------
# A group entry (executor._group_entries): (decision lines' tails, survived, final text, [(step, new text)],
# removed spans, entity types, seeds or None, plain, [(step, outcome)]). A keyed entry
# (executor._apply_text_keyed): (Decision, removed spans or None, entity types or None).

def encode_group(entry: tuple) -> list:
    tails, alive, text, changed, spans, types, seeds, plain, pattern = entry
    return [tails, alive, text, changed, spans, types, seeds, plain, pattern]


def decode_group(value: list, patterns: dict) -> tuple:
    tails, alive, text, changed, spans, types, seeds, plain, pattern = value
    pattern = tuple((p, o) for p, o in pattern)
    return (tuple(tails), bool(alive), text, tuple((p, t) for p, t in changed), tuple((s, e) for s, e in spans),
            tuple(types), seeds, bool(plain), patterns.setdefault(pattern, pattern))


def encode_keyed(entry: tuple) -> list:
    decision, spans, types = entry
    return [decision.outcome, decision.reason, decision.score, decision.details, decision.text, spans, types]


def decode_keyed(value: list) -> tuple:
    from .base import Decision

    outcome, reason, score, details, text, spans, types = value
    return (Decision(outcome, reason, score, details, text),
            None if spans is None else tuple((s, e) for s, e in spans),
            None if types is None else tuple(types))
