import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

# The embedded default (no REDIS_URL): queued jobs run in this process's thread pool, not in the request.
from captionlab import inprocess  # noqa: E402

inprocess.enable()
