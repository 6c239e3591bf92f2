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
