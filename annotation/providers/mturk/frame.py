"""Framing by MTurk and the worker's MTurk session: what the ExternalQuestion page
(``annotation.web.crowd.mturk``) and the provider's last step (``MTurkProvider.finish_assignment``) share.

Only responses passed through ``framable`` may be framed, and only by MTurk's origins (CSP
frame-ancestors); every other page keeps ``X-Frame-Options: DENY``.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpResponse

from ...models import Campaign
from .layout import SUBMIT_HOSTS

FRAME_ANCESTORS = "https://*.mturk.com https://mturk.com https://workersandbox.mturk.com"
SESSION_KEY = "captionlab_mturk"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def framable(response: HttpResponse) -> HttpResponse:
    """Let MTurk (and only MTurk) frame this response."""
    response["Content-Security-Policy"] = f"frame-ancestors {FRAME_ANCESTORS}"
    response.xframe_options_exempt = True
    return response


def valid_submit_to(value: str) -> str | None:
    """turkSubmitTo as an origin when it is MTurk's (or, with DEBUG or MTURK_ALLOW_LOCAL_SUBMIT,
    a local test endpoint); None otherwise."""
    value = (value or "").strip().rstrip("/")
    if value in SUBMIT_HOSTS:
        return value
    if not (settings.DEBUG or settings.MTURK_ALLOW_LOCAL_SUBMIT):
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    if (parts.scheme in ("http", "https") and parts.hostname in LOCAL_HOSTS and not parts.path
            and not parts.query and not parts.fragment and not parts.username):
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return f"{parts.scheme}://{host}{f':{port}' if port else ''}"
    return None


def mturk_session(request, campaign: Campaign) -> dict | None:
    return (request.session.get(SESSION_KEY) or {}).get(str(campaign.pk))
