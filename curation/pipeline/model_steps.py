"""What the filters that use the model pack share: finding their model, the decision when there is none, and
the run page's note on the steps that could not run.

A filter that uses a pretrained model declares ``model_kind`` ("clip" or "text"). With no such model
registered it never crashes: every item gets "not applicable" with the reason ``no_model_registered`` and a
note that says so, and ``step_notes`` turns those decisions into the funnel's "not run: no model registered".
A registered model whose files are missing or changed gets ``model_unavailable`` with the pack's message.
"""
from __future__ import annotations

import numpy as np

from .base import Decision, not_applicable

NO_MODEL = "no_model_registered"
UNAVAILABLE = "model_unavailable"
NOT_RUN = "not run: no model registered"


def find(name: str, kind: str):
    """The registered model named ``name`` ("" = the default one) of the kind, or None."""
    import pack

    return pack.find_model(name or None, kind=kind)


def no_model(name: str, kind: str) -> Decision:
    what = "image-text (CLIP-family)" if kind == "clip" else "sentence encoder"
    note = NOT_RUN if not name else f"{NOT_RUN} under the name {name!r}"
    return not_applicable(NO_MODEL, note=note, model=None,
                          help=f"Register a {what} model: manage.py models add-pretrained DIR --name NAME --licence L")


def unavailable(model, error: Exception) -> Decision:
    return not_applicable(UNAVAILABLE, note=f"not run: the model {model.name!r} could not be loaded",
                          model=model.key, error=str(error)[:500])


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of L2-normalised vectors (the CLIP score before the logit scale)."""
    return np.einsum("ij,ij->i", a.astype(np.float32), b.astype(np.float32))


def clean_prompts(value, name: str, flt: str) -> list[str]:
    """A list of distinct non-empty strings (a newline-separated string is accepted too); ValueError otherwise."""
    if isinstance(value, str):
        value = value.splitlines()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{flt}: {name} must be a list of strings")
    out, seen = [], set()
    for entry in value:
        entry = " ".join(entry.split())
        if entry and entry.lower() not in seen:
            seen.add(entry.lower())
            out.append(entry)
    return out


# --- The run page ---------------------------------------------------------------------------------------

def step_notes(run) -> dict[int, str]:
    """{step index: note} for the steps of a run that could not use their model (and the label overlap whose
    labels would have come from such a step), for the funnel to say so beside the counts."""
    from ..models import FilterDecision
    from . import registry

    notes: dict[int, str] = {}
    labeller_not_run = False
    for position, step in enumerate(run.snapshot or []):
        try:
            cls = registry.get(step["filter"])
        except KeyError:
            continue
        if getattr(cls, "model_kind", None):
            if FilterDecision.objects.filter(run=run, step=position, reason=NO_MODEL).exists():
                notes[position] = NOT_RUN
                labeller_not_run = labeller_not_run or step["filter"] == "image_labels"
            elif FilterDecision.objects.filter(run=run, step=position, reason=UNAVAILABLE).exists():
                notes[position] = "not run: the model could not be loaded (see the step's decisions)"
        elif step["filter"] == "label_overlap" and labeller_not_run:
            notes[position] = "no labels: image_labels was not run (no model registered)"
    return notes


def models_used(run) -> dict[str, list[int]]:
    """{model key: [1-based step numbers]} of the run's steps that decided with a model-pack model (what a
    release card names beside the library versions)."""
    from ..models import FilterDecision
    from . import registry

    used: dict[str, list[int]] = {}
    for position, step in enumerate(run.snapshot or []):
        try:
            cls = registry.get(step["filter"])
        except KeyError:
            continue
        if not getattr(cls, "model_kind", None):
            continue
        key = (FilterDecision.objects.filter(run=run, step=position, details__has_key="model")
               .values_list("details__model", flat=True).first())
        if isinstance(key, str) and key:
            used.setdefault(key, []).append(position + 1)
    return used
