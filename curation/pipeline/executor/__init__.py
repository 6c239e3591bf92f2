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
- ``decisions``: writing decision rows (psycopg's COPY on PostgreSQL, ``bulk_create`` elsewhere) and the
  transformed captions;
- ``funnel``: the funnel (a GROUP BY over the run's decisions), its lock and its warnings;
- ``runlevel``: the run-level steps over the survivors, and reconciling a finished run after overrides;
- ``propagate``: a text a person set at a transform step, through the run's later steps;
- ``runs``: a run's life (start, chunks, finish) and its progress, as the Celery tasks call it.

This package exports the public names below. A test that replaces a setting or a function patches the
module that owns it (``planning.CHUNK_IMAGES``, ``chunks.SUB_BATCH_CAPTIONS``, ``runs.finish``).
"""
from __future__ import annotations

from .chunks import process_chunk
from .decisions import write_decisions
from .funnel import compute_funnel, funnel_lock, funnel_warnings, step_warning, with_warnings
from .items import load_items
from .planning import (
    PipelineError,
    instantiate,
    library_versions,
    load_artifact_state,
    save_artifact,
    validate_steps,
)
from .propagate import rerun_later_steps
from .runlevel import finalise, reconcile
from .runs import PHASES, chunk_failed, finish, progress, run_chunk, start

__all__ = ["PHASES", "PipelineError", "chunk_failed", "compute_funnel", "finalise", "finish", "funnel_lock",
           "funnel_warnings", "instantiate", "library_versions", "load_artifact_state", "load_items",
           "process_chunk", "progress", "reconcile", "rerun_later_steps", "run_chunk", "save_artifact", "start",
           "step_warning", "validate_steps", "with_warnings", "write_decisions"]
