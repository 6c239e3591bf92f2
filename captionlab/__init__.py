"""CaptionLab platform package: settings, URLs, the Celery app, WSGI/ASGI entry points.

The package is deliberately not called ``platform``: a top-level package of that name would
shadow Python's standard ``platform`` module, which ``uuid`` and Django import at start-up.
"""
from .celery import app as celery_app

__all__ = ("celery_app",)
