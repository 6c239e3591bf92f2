"""A throw-away PostgreSQL database (and Redis database) for a benchmark, created, migrated and dropped afterwards.

Two people benchmarking on one server must not disturb each other: every benchmark takes its scratch
database name from ``--db-name`` (default: the benchmark's name and this process's id), creates it with a
plain ``CREATE DATABASE`` that fails if the name is taken, and drops only a database this process created.
Benchmarks that use Redis take ``--redis-url``; the default claims a free database on the server with a
``SET NX`` marker, so a second run picks another one.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
REDIS_CLAIM_KEY = "captionlab:benchmark:owner"


@dataclass
class ScratchDb:
    url: str  # DATABASE_URL form, for Django
    dsn: str  # libpq form, for psycopg
    env: dict  # the environment for child processes: this database, no broker, quiet logs


def default_db_name(benchmark: str) -> str:
    return f"captionlab_bench_{benchmark}_{os.getpid()}"


def add_scratch_arguments(parser: argparse.ArgumentParser, benchmark: str) -> None:
    """``--db-name`` and ``--keep-db``, with a default no other run on this machine uses."""
    parser.add_argument("--db-name", type=scratch_name, default=default_db_name(benchmark),
                        help="scratch PostgreSQL database to create, migrate and drop; it must not exist "
                             "(default: %(default)s, with this process's id)")
    parser.add_argument("--keep-db", action="store_true", help="keep the scratch database afterwards")


def scratch_name(value: str) -> str:
    if not _NAME.match(value):
        raise argparse.ArgumentTypeError(f"{value!r}: use lower-case letters, digits and _ (at most 63)")
    return value


def postgres_base_url() -> str | None:
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        print("DATABASE_URL must point to PostgreSQL, e.g. postgres://postgres@127.0.0.1:5432/postgres")
        return None
    return base


@contextlib.contextmanager
def scratch_database(base_url: str, name: str, *, keep: bool = False):
    """Create ``name`` (refusing one that exists: it may be someone else's run), migrate it, yield it,
    then drop it unless ``keep``. Nothing is dropped that this call did not create."""
    import psycopg
    from psycopg import sql

    scratch_name(name)
    parts = urlsplit(base_url)
    admin = urlunsplit(parts._replace(scheme="postgresql"))
    with psycopg.connect(admin, autocommit=True) as conn:
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.errors.DuplicateDatabase:
            raise SystemExit(f"database {name} already exists (another run's, or one kept with --keep-db); "
                             f"pick another --db-name, or drop it yourself if it is yours") from None
    url = urlunsplit(parts._replace(path=f"/{name}"))
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0", "--skip-checks"], cwd=ROOT, env=env, check=True)
        yield ScratchDb(url=url, dsn=urlunsplit(parts._replace(scheme="postgresql", path=f"/{name}")), env=env)
    finally:
        if keep:
            print(f"kept the scratch database {name}")
        else:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def claim_redis_db(server_url: str, *, first: int = 1, last: int = 15) -> str:
    """A Redis URL on ``server_url``'s server whose database was empty and is now marked as this process's.

    Raises SystemExit when every database from ``first`` to ``last`` is in use."""
    import redis

    parts = urlsplit(server_url)
    for db in range(first, last + 1):
        url = urlunsplit(parts._replace(path=f"/{db}"))
        client = redis.Redis.from_url(url)
        if client.dbsize() == 0 and client.set(REDIS_CLAIM_KEY, os.getpid(), nx=True):
            if client.dbsize() == 1:  # nobody wrote in between: the database is ours
                return url
            client.delete(REDIS_CLAIM_KEY)
    raise SystemExit(f"no empty Redis database {first}-{last} on {server_url}; pass --redis-url")


def release_redis_db(url: str) -> None:
    """Empty a database claimed by claim_redis_db, if this process still owns it."""
    import redis

    client = redis.Redis.from_url(url)
    if client.get(REDIS_CLAIM_KEY) == str(os.getpid()).encode():
        client.flushdb()
