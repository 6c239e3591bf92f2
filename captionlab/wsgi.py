import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "captionlab.settings")
application = get_wsgi_application()

# The embedded default (no REDIS_URL): queued jobs run in this process's thread pool, not in the request.
from captionlab import inprocess  # noqa: E402

inprocess.enable()

# Import every view now, so that with `gunicorn --preload` the workers share these pages of
# memory with the master instead of each importing them on its first request.
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns


def _import_first_request_modules() -> None:
    """Modules every worker would otherwise import on its first requests, each a copy of its own
    (about 7 MiB a worker, measured after benchmarks/annotate_load.py): the template tag libraries,
    the Redis client of the cache and of Celery's broker and result backend, and PostgreSQL's
    connection pool. Imports only: nothing connects before the fork."""
    import importlib

    from django.conf import settings
    from django.template import engines

    engines.all()  # each engine imports its tag libraries
    names = {conf["BACKEND"].rsplit(".", 1)[0] for conf in settings.CACHES.values()}
    if settings.REDIS_URL:
        names |= {"redis", "kombu.transport.redis", "celery.backends.redis"}
    if settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
        names.add("psycopg_pool")
    for name in sorted(names):
        importlib.import_module(name)


_import_first_request_modules()
