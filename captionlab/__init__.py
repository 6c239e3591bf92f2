"""CaptionLab's kernel: roles, tokens, middleware, the CSV writer, job heartbeats and the registry of
job kinds, shared API helpers. It imports no app; the apps register what it needs in their
``AppConfig.ready()``. Settings, URLs, the Celery app and the WSGI/ASGI entry points are in ``config``.

The package is deliberately not called ``platform``: a top-level package of that name would
shadow Python's standard ``platform`` module, which ``uuid`` and Django import at start-up.
"""
