"""The Redis cache keeps one client per connection pool (captionlab/redis_cache.py): what Django's backend does
per cache call (build a ``redis.Redis``, some 170 response callbacks each) happens once, and the cache still
works across threads against the real server."""
import os
import threading

import pytest
from django.core.cache.backends.redis import RedisCache

from captionlab.redis_cache import CaptionLabRedisCache


@pytest.fixture
def cache():
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("needs Redis: set REDIS_URL (CI does)")
    backend = CaptionLabRedisCache(url, {"KEY_PREFIX": "test-redis-cache"})
    yield backend
    backend.delete_many([f"k{i}" for i in range(40)] + ["shared"])


def test_one_client_serves_every_call_and_values_round_trip(cache):
    first = cache._cache.get_client(write=True)
    cache.set("shared", {"votes": 3}, 30)
    assert cache.get("shared") == {"votes": 3}
    assert cache.add("k0", 1, 30) and cache.incr("k0") == 2
    assert cache._cache.get_client(write=False) is first is cache._cache.get_client(write=True)
    # Django's own backend builds a new client for every call.
    plain = RedisCache(os.environ["REDIS_URL"], {"KEY_PREFIX": "test-redis-cache"})
    assert plain._cache.get_client() is not plain._cache.get_client()


def test_threads_share_the_client_and_see_each_others_writes(cache):
    errors, clients = [], set()

    def work(i):
        try:
            cache.set(f"k{i}", i, 30)
            assert cache.get(f"k{i}") == i
            clients.add(id(cache._cache.get_client()))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(clients) == 1
    assert cache.get_many([f"k{i}" for i in range(1, 40)]) == {f"k{i}": i for i in range(1, 40)}
