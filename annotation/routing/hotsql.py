"""The hot path's SQL plumbing: a server-binding cursor (prepared statements on PostgreSQL), the
statement cache, and decoding a task row read by plain SQL into a ``Task``.

Building an ORM query costs far more CPU than PostgreSQL spends running the statements of the
annotator's loop (measured with benchmarks/annotate_load.py), so the statements run on every fetch
and vote are written once, as plain SQL, and kept here by name.
"""
from __future__ import annotations

from contextlib import contextmanager

from django.db import connection

from ..models import Campaign, Caption, Task


@contextmanager
def hot_cursor():
    """The cursor of the annotator's hot path. On PostgreSQL it binds parameters on the server, so
    psycopg prepares each hot statement after a few runs and PostgreSQL plans it once per
    connection instead of once per request (planning the claim's anti-joins cost more CPU than
    running them). Django's default cursor binds on the client and never prepares. Queries run
    through Django's wrapper, so they are logged and counted like any other."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            yield cursor
        return
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:  # Django turns psycopg's automatic preparation off
        raw.prepare_threshold = 2  # only server-binding cursors (this one) ever prepare
    with connection._prepare_cursor(ServerBindingCursor(raw)) as cursor:
        yield _LoggedSQL(cursor)


class _LoggedSQL:
    """Django's query log cannot render a prepared statement's SQL (it records None); this puts
    the statement and its parameters there instead, for DEBUG pages and query-counting tests."""

    def __init__(self, cursor):
        self._cursor = cursor

    def execute(self, sql, params=None):
        result = self._cursor.execute(sql, params)
        log = connection.queries_log
        if connection.queries_logged and log and log[-1].get("sql") is None:
            log[-1]["sql"] = f"{' '.join(sql.split())} -- prepared; params {params!r}"
        return result

    def __getattr__(self, name):
        return getattr(self._cursor, name)


_TASK_FIELDS = list(Task._meta.concrete_fields)


_SQL: dict[str, str] = {}


def prepared_sql(name: str, build) -> str:
    text = _SQL.get(name)
    if text is None:
        text = _SQL[name] = build()
    return text


def task_columns(alias: str = "t") -> str:
    return ", ".join(f'{alias}."{f.column}"' for f in _TASK_FIELDS)


def task_from_row(values, campaign: Campaign, caption_text=None) -> Task:
    """A Task from its columns in field order (JSON decoded as the ORM does), with its campaign
    and, when the row has one, a caption holding only id and text (the rest loads on access)."""
    values = [f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
              for f, v in zip(_TASK_FIELDS, values)]
    task = Task.from_db(connection.alias, [f.attname for f in _TASK_FIELDS], values)
    task.campaign = campaign
    if task.caption_id is not None and caption_text is not None:
        task.caption = Caption.from_db(connection.alias, ["id", "image_id", "text"],
                                       [task.caption_id, task.image_id, caption_text])
    return task


def instance_from_row(model, values, fields=None):
    """A model instance from its concrete columns in field order, as the ORM would build it
    (PostgreSQL values: JSON decoded through ``from_db_value``, the rest as psycopg gives them)."""
    fields = fields or model._meta.concrete_fields
    values = [f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
              for f, v in zip(fields, values)]
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def outermost(conn) -> bool:
    """True inside a transaction this code opened itself (not a caller's or a test's), where a
    SET LOCAL applies to exactly this transaction."""
    return conn.in_atomic_block and len(conn.atomic_blocks) == 1
