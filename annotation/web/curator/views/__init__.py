"""The curator's campaign pages: list, create from a selection, the dashboard, members, gold and
training items, the per-worker table with blocking, tasks with their aggregated labels, and the
CSV export.

Views are thin, as in ``curation.views_pipeline``: they parse (``annotation.forms``), check the
role (every view is ``role_required(CURATOR)``; admins pass), call one service
(``annotation.services``, ``annotation.routing``) and render. Errors of a service come back as
``CampaignError(message, field)`` and go next to that field; the typed input stays in the form.
Every form posts without JavaScript; htmx only polls the progress and previews the instructions.

One module per responsibility; this package names the public functions, so ``urls`` and
``modeling.views_loop`` import from ``annotation.web.curator.views``:

- ``listing``: the campaign list, the create form, the instructions preview;
- ``context``: ``dashboard_context`` and the figures it is built from (also ``worker_rows``);
- ``dashboard``: the detail page, the progress card, the status and recompute actions;
- ``workers``: members, and the per-worker table with blocking;
- ``gold``: gold, training and qualification items;
- ``task_list``: the tasks page; ``export``: the CSV export;
- ``verify``: applying a verify-rewrite campaign's verdicts to its run;
- ``crowd``: the crowd controls (provider, reward, budget, places, review rules) and the ledger.
"""
from .context import (
    DEFAULT_PRECISION,
    MAX_LIVE_VOTES,
    STATUS_ACTIONS,
    agreement_hint,
    dashboard_context,
    worker_rows,
)
from .crowd import LEDGER_PER_PAGE, campaign_crowd, campaign_ledger
from .dashboard import (
    campaign_aggregate,
    campaign_detail,
    campaign_progress,
    campaign_status,
)
from .export import campaign_export
from .gold import GOLD_PER_PAGE, campaign_gold
from .listing import (
    CAMPAIGNS_PER_PAGE,
    campaign_create,
    campaign_list,
    instructions_preview,
)
from .pairs import campaign_pairs_fit
from .task_list import TASKS_PER_PAGE, campaign_tasks
from .verify import campaign_apply_verdicts
from .workers import campaign_members, campaign_workers

__all__ = ["campaign_list", "campaign_create", "campaign_detail", "campaign_progress", "campaign_status",
           "campaign_aggregate", "campaign_members", "campaign_gold", "campaign_workers", "campaign_tasks",
           "campaign_export", "instructions_preview", "worker_rows", "agreement_hint", "dashboard_context",
           "DEFAULT_PRECISION", "MAX_LIVE_VOTES", "STATUS_ACTIONS", "CAMPAIGNS_PER_PAGE", "TASKS_PER_PAGE",
           "GOLD_PER_PAGE", "campaign_crowd", "campaign_ledger", "LEDGER_PER_PAGE",
           "campaign_apply_verdicts", "campaign_pairs_fit"]
