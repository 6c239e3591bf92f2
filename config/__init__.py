"""The composition root: settings, URLs, the Celery app, the WSGI/ASGI entry points, gunicorn's
settings and the home page. The only package that knows every app."""
from .celery import app as celery_app

__all__ = ("celery_app",)
