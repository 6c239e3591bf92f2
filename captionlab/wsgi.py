import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "captionlab.settings")
application = get_wsgi_application()

# Import every view now, so that with `gunicorn --preload` the workers share these pages of
# memory with the master instead of each importing them on its first request.
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns
