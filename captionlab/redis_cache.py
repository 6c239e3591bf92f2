"""Django's Redis cache, with one Redis client object per connection pool instead of one per operation.

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` for every cache call. With redis-py 6
that constructor fills a case-insensitive table of some 170 response callbacks each time: measured on the
work page's submit-and-next, three of them per request (the session, the open-task counter) cost about
8% of the request's CPU. A ``redis.Redis`` over a connection pool is safe to share between threads
(each command takes a connection from the pool), so the client made for a pool is kept and reused.
"""
from __future__ import annotations

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class ReusedRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            if index not in self._pools:
                self._get_connection_pool(write)  # creates the pool (a racing thread's duplicate is harmless)
            client = self._clients.setdefault(index, self._client(connection_pool=self._pools[index]))
        return client


class CaptionLabRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusedRedisCacheClient
