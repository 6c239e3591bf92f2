"""Running a pipeline over a collection: fit, fan out over chunks, finalise, count the funnel.

A run works image by image: a chunk is a list of image ids, and holds those images and all their
captions, so image-level rules (drop an image left with no kept caption) stay inside one chunk.
Within a chunk the steps run in order on what is still alive: image steps decide per image (a
dropped image takes its captions with it), caption steps per caption. Texts are parsed with spaCy
lazily, once per distinct text, with the union of the components the remaining steps need, and
parsed again only for texts a transform changed. Decisions are upserted (unique per run, step and
target), so a chunk that runs twice writes each decision once. Run-level steps (duplicates across
the run, rare entity types, topic models) run once after every chunk, on the survivors, streamed
from the database in bounded batches where the step allows it.

The modules, by responsibility:

- ``planning``: validating the steps, filters with their fitted artifacts, fitting, cutting chunks;
- ``items``: loading a chunk's images and captions;
- ``chunks`` and ``steps``: executing a chunk, step by step or once per distinct text;
- ``decisions``: writing decision rows (COPY) and the transformed captions;
- ``runlevel``: the run-level steps over the survivors;
- ``funnel``: the funnel, its lock, its warnings, and reconciling a finished run after overrides;
- ``propagate``: a text a person set at a transform step, through the run's later steps;
- ``runs``: a run's life (start, chunks, finish) and its progress, as the Celery tasks call it.

Every name the single module had is importable from here. Setting one of them on this package
(``executor.CHUNK_IMAGES = 2`` in a test, ``monkeypatch.setattr(executor, "finalise", ...)``) sets it
in the module that uses it too, as it did when the executor was one module.
"""
from __future__ import annotations

import sys
import types

from django.db import connection  # noqa: F401 - patchable here, as before the split (see _Package)

from . import chunks, decisions, funnel, items, planning, propagate, runlevel, runs, steps
from .chunks import SUB_BATCH_CAPTIONS, _caption_order, _ChunkState, _has_decisions, _sub_batches, process_chunk
from .decisions import (
    _DECISION_COLUMNS, _DECISION_COPY, DecisionRow, _Child, _decision_row, _decision_tail, _DecisionWriter,
    _insert_children, _insert_children_orm, _json, _line_decision, _plain_tail, _row_line, _save_transformed,
    write_decision_lines, write_decisions,
)
from .funnel import (
    FUNNEL_LOCK_CLASS, STEP_WARNING_SHARE, _funnel_from_chunks, _funnel_rows, compute_funnel, funnel_lock,
    funnel_warnings, reconcile, step_warning, with_warnings,
)
from .items import _item_rows, _labels, load_items
from .planning import (
    CHUNK_CAPTIONS, CHUNK_IMAGES, MAX_ATTEMPTS, SKIP_ORIGINS, PipelineError, _chunk_image_ids, _fit, instantiate,
    library_versions, load_artifact_state, save_artifact, validate_steps,
)
from .propagate import relink_chains, rerun_later_steps
from .runlevel import RUN_LEVEL_BATCH, SHARDS, _keep_unjudged, _retract_later, _survivor_rows, _survivors, finalise, shard_of
from .runs import PHASES, _maybe_finish, _no_cyclic_gc, _publish_repeated, chunk_failed, finish, progress, run_chunk, start
from .steps import (
    _DECISION_CACHE, _OUTCOME_PATTERNS, CACHE_MAX_CHARS, DECISION_CACHE_SIZE, _apply_checked, _apply_each,
    _apply_group, _apply_text_keyed, _apply_text_only, _cache_get, _cache_put, _group_entries, _memoisable,
    _run_step, _run_steps, _shares_decisions, _step_errors, _take_shared, _undecided,
)

_MODULES = (planning, items, decisions, steps, chunks, funnel, runlevel, runs, propagate)


class _Package(types.ModuleType):
    """This package, whose attributes, when set, are set in each of its modules that holds the name: the
    module-level settings and functions that tests and deployments replace keep their effect."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        for module in _MODULES:
            if name in vars(module):
                setattr(module, name, value)


sys.modules[__name__].__class__ = _Package

__all__ = ["PipelineError", "validate_steps", "start", "run_chunk", "chunk_failed", "finish", "progress",
           "compute_funnel", "funnel_lock", "funnel_warnings", "with_warnings", "save_artifact", "load_artifact_state", "reconcile",
           "process_chunk", "finalise", "load_items", "instantiate", "library_versions", "write_decisions",
           "rerun_later_steps"]
