"""A throw-away PostgreSQL database for a benchmark, created, migrated and dropped afterwards."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class ScratchDb:
    url: str  # DATABASE_URL form, for Django
    dsn: str  # libpq form, for psycopg
    env: dict  # the environment for child processes: this database, no broker, quiet logs


def postgres_base_url() -> str | None:
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        print("DATABASE_URL must point to PostgreSQL, e.g. postgres://postgres@127.0.0.1:5432/postgres")
        return None
    return base


@contextlib.contextmanager
def scratch_database(base_url: str, name: str, *, keep: bool = False):
    import psycopg

    parts = urlsplit(base_url)
    admin = urlunsplit(parts._replace(scheme="postgresql"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(parts._replace(path=f"/{name}"))
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0", "--skip-checks"], cwd=ROOT, env=env, check=True)
        yield ScratchDb(url=url, dsn=urlunsplit(parts._replace(scheme="postgresql", path=f"/{name}")), env=env)
    finally:
        if not keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
