import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# The embedded default (no REDIS_URL): queued jobs run in this process's thread pool, not in the request.
from captionlab import inprocess  # noqa: E402

inprocess.enable()

# Import every view now, so that with `gunicorn --preload` the workers share these pages of
# memory with the master instead of each importing them on its first request.
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018

# Templates of the pages every annotator opens (log in, the campaign list, the work page and the panel
# each submit answers with); the cached loader keeps them compiled once they are loaded.
ANNOTATOR_TEMPLATES = (
    "registration/login.html",
    "base.html",
    "annotation/work/list.html",
    "annotation/work/_campaigns.html",
    "annotation/work/page.html",
    "annotation/work/_panel.html",
    *(f"annotation/work/widgets/{widget}.html" for widget in ("choices", "slider", "candidates", "verify", "write", "pair")),
    "annotation/work/_choices.html",
)


def _import_first_request_modules() -> None:
    """Modules every worker would otherwise import on its first requests, each a copy of its own
    (about 7 MiB a worker, measured after benchmarks/annotate_load.py): the template tag libraries,
    the Redis client of the cache and of Celery's broker and result backend, PostgreSQL's
    connection pool, and the session engine, message storage and authentication backends Django
    imports by name on a request. Imports only: nothing connects before the fork."""
    import importlib

    from django.conf import settings
    from django.template import engines

    engines.all()  # each engine imports its tag libraries
    names = {conf["BACKEND"].rsplit(".", 1)[0] for conf in settings.CACHES.values()}
    names.add(settings.SESSION_ENGINE)
    for path in (settings.SESSION_SERIALIZER, settings.MESSAGE_STORAGE, *settings.AUTHENTICATION_BACKENDS):
        names.add(path.rsplit(".", 1)[0])
    if settings.REDIS_URL:
        names |= {"redis", "kombu.transport.redis", "celery.backends.redis"}
    if settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
        names.add("psycopg_pool")
    for name in sorted(names):
        importlib.import_module(name)


def _build_first_request_caches() -> None:
    """Tables every worker would otherwise build on its first requests, each a copy of its own, and
    writing to many of the master's pages on the way (each one then copied into the worker): the URL
    resolver's reverse tables, made by compiling the regular expression of every URL pattern; the
    translation catalogs; the template engine's loaders and context processors and the annotator's
    templates. Measured by forking after this module and serving the login page from 8 threads, the
    child copied 12 MiB instead of 20 (the reverse tables most of it). Nothing here connects to the
    database or to Redis."""
    from django.template import engines
    from django.template.loader import get_template
    from django.utils import formats, translation

    get_resolver().reverse_dict  # compiles every pattern and builds the reverse tables (current language)  # noqa: B018
    translation.gettext("Log in")  # loads the catalogs of LANGUAGE_CODE (an empty message does not)
    formats.get_format("DATE_FORMAT")  # imports the format modules of LANGUAGE_CODE
    for engine in engines.all():
        getattr(engine, "engine", engine).template_context_processors  # imports them (Django engines)  # noqa: B018
    for name in ANNOTATOR_TEMPLATES:
        get_template(name)


_import_first_request_modules()
_build_first_request_caches()
