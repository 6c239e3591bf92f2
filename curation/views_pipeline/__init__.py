"""Curator review pages of the curation pipeline: pipelines and their editor, runs with a live
progress bar and the funnel, each step's decisions with overrides, and score histograms.

Views are thin: they parse, check the role, call one service (``pipeline_save``, ``run_create``,
``decision_override``, ``decisions_override``) or read through the selectors, and render.
A view that htmx also calls answers with its fragment for htmx requests and the page otherwise
(``curation.views._render``). Every form works without JavaScript; htmx only saves the page reloads.

One module per responsibility; this package names the public views, so ``urls_pipeline`` imports
from ``curation.views_pipeline`` as before:

- ``editor``: the filter catalogue and the step editor's fields (parsing what a curator submits);
- ``pipelines``: the pipeline list, the editor page, starting a run;
- ``runs``: the run list, the run page with its progress and funnel;
- ``selectors``: the decisions browser's filters, counts and pages; ``dressing``: how a decision is shown;
- ``steps``: a step's decisions page; ``histogram``: its score histogram and what-if thresholds;
- ``overrides``: keeping or dropping one decision, or the selected ones.
"""
from .histogram import HISTOGRAM_BINS, run_step_histogram
from .overrides import decision_override, step_overrides
from .pipelines import PIPELINES_PER_PAGE, pipeline_detail, pipeline_list, pipeline_run
from .runs import RUNS_PER_PAGE, run_detail, run_list, run_progress
from .selectors import DECISIONS_PER_PAGE, TABS, StepFilters
from .steps import run_step

__all__ = ["pipeline_list", "pipeline_detail", "pipeline_run", "run_list", "run_detail", "run_progress", "run_step",
           "run_step_histogram", "decision_override", "step_overrides", "StepFilters", "TABS", "DECISIONS_PER_PAGE",
           "HISTOGRAM_BINS", "PIPELINES_PER_PAGE", "RUNS_PER_PAGE"]
