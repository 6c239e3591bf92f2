"""Campaign aggregation: consensus labels, agreement and per-worker quality figures.

Two kinds of pass write ``Aggregate`` rows and ``Campaign.stats``:

- the incremental pass (``aggregate_changes``, queued by every vote through
  ``annotation.tasks.schedule_aggregation``): the per-task rules (``per_task``: majority with
  ties reported, mean and standard deviation, the seed-004 "consistent" rule, ROVER) over the
  tasks whose votes changed since the last pass, merged into the stored rows and the campaign's
  figures (``tally``); its cost follows the changed votes, not the campaign's size;
- the full pass (``aggregate_campaign``: the recompute button, the API, ``manage.py campaign
  aggregate``, and the bounded schedule of ``incremental.models_wait``): everything again, plus
  the model-based methods (``methods``: Dawid-Skene, GLAD, MACE, Bradley-Terry), Krippendorff's
  alpha and the per-worker figures (gold accuracy, Dawid-Skene reliability, each worker's alpha
  with the rest: ``agreement``).

Votes read: the campaign's real votes on real tasks, less quarantined ones and those of rejected
assignments; blocked workers' votes are counted apart and left out (``frames``). Passes over one
campaign are serialised by an advisory lock, never by a row lock the vote path needs (``store``).
"""
from .agreement import krippendorff_alpha, worker_alpha
from .frames import Results, dimension_of, explode_parts, load_votes
from .full import aggregate_campaign, worker_figures
from .incremental import aggregate_changes, models_due, models_wait
from .methods import MODEL_METHODS, ds_reliability
from .per_task import PER_TASK_METHODS, fluency_consistent, majority, means, texts, tie_break_rule, validate_tie_break

__all__ = ["aggregate_campaign", "aggregate_changes", "models_due", "models_wait", "krippendorff_alpha",
           "worker_alpha", "load_votes", "explode_parts", "dimension_of", "ds_reliability", "majority", "means",
           "fluency_consistent", "texts", "tie_break_rule", "validate_tie_break", "worker_figures", "Results",
           "PER_TASK_METHODS", "MODEL_METHODS"]
