"""PostgreSQL connections come from a bounded pool per process, however many threads ask."""
import threading

import pytest
from django.conf import settings
from django.db import connection, connections

pytestmark = pytest.mark.skipif(not settings.USING_POSTGRES, reason="the pool is PostgreSQL's (no DATABASE_URL here)")


def _backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_sixteen_threads_share_at_most_the_pool_size_of_connections():
    cap = settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]
    assert settings.DATABASES["default"]["CONN_MAX_AGE"] == 0  # the pool, not per-thread persistence
    threads, seen, errors = 16, [], []
    barrier = threading.Barrier(threads)

    def work():
        try:
            barrier.wait(10)
            for _ in range(5):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_sleep(0.02)")
                seen.append(_backends())
                connection.close()  # what the end of a request does: the connection goes back
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            connections.close_all()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    assert not errors
    # The test's own connection and the pool's: never one connection per thread.
    assert max(seen) <= cap + 1, f"{max(seen)} backends for {threads} threads with a pool of {cap}"
