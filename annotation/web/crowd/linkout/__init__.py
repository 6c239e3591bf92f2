"""Pages of external crowds.

Workers (no account): the link-out start URL (``/x/<public_token>/start?PROLIFIC_PID=...``), the
consent page, and the Finish step shared by every external provider (``external-finish``).

Curators: the provider page of a campaign (launch, pause, extend, finish, the public start URL,
jobs, assignments with approve / reject / bonus, the marketplace CSV files, MTurk batch CSV files
and the cost summary). Errors of a provider (``ProviderError``) are shown on the page; nothing is
half-launched because each provider call is one transaction.

One module per responsibility; this package names the views and helpers, so ``linkout_urls`` and
the curator's ``views.context`` import from ``annotation.web.crowd.linkout`` (the private
helpers live in their modules; nothing outside this package imports them):

- ``participant``: the worker's start, consent, finish and image views;
- ``provider``: the curator's provider page and its actions (settings, launch ... sync, assignments,
  marketplace and batch CSV files);
- ``helpers``: the page context and the cost summary (``cost_context``), and the form parsers.
"""
from __future__ import annotations

import logging

from .helpers import MAX_UPLOAD, assignment_rows, cost_context
from .participant import (
    external_finish,
    external_image,
    linkout_consent,
    linkout_needs_consent,
    linkout_start,
)
from .provider import (
    batch_export,
    batch_import,
    campaign_provider,
    provider_action,
    provider_assignment,
    provider_export,
    provider_import,
)

log = logging.getLogger(__name__)

__all__ = ["linkout_start", "linkout_consent", "external_finish", "campaign_provider", "provider_action",
           "provider_assignment", "provider_export", "provider_import", "batch_export", "batch_import",
           "cost_context", "external_image", "linkout_needs_consent", "assignment_rows", "MAX_UPLOAD"]
