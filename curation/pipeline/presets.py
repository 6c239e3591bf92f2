"""Pipelines named after the seed papers. ``ensure_presets`` creates them (editable copies) in the
database; a curator edits steps and parameters there.

The presets are meant to work on a lab's first collection, not only at the papers' web scale: where a
paper's number is absolute and assumes millions of items, the step's default (or the preset) makes it
relative to the run: informativeness keeps from a percentile of the collection's own scores, the LDA
vocabulary bounds loosen for small collections, and the rare-entity minimum is a share of the run
(``min_share``, capped at the paper's 100). ``conceptual-captions-lowercase`` is the variant for alt-text
written in lower case.
"""
from __future__ import annotations


def _lower_case_variant(steps: list[dict]) -> list[dict]:
    """The Conceptual Captions steps for sources written in lower case (alt-text of social sites, scraped
    thumbnails): the paper's capitalisation rule ("candidates where the first word is not capitalized ...
    are discarded") would drop nearly all of them, so the first word need not be capitalised; title-case
    strings are still dropped (the capitalised-word ratio). Emoji, common in such sources, are stripped
    rather than dropping the caption."""
    changed = {"capitalisation": {"require_first_capitalised": False}, "emoji": {"mode": "strip"}}
    return [{**step, "params": {**step.get("params", {}), **changed[step["filter"]]}} if step["filter"] in changed
            else step for step in steps]


PRESETS: dict[str, dict] = {
    "conceptual-captions": {
        "description": "Conceptual Captions (seed 002, Section 3): image filters, text filters, "
                       "image&text label overlap, hypernymization and the rare-entity-type filter. The unsafe-content "
                       "check and the image labels use the registered CLIP model; without one they are not run.",
        "steps": [
            {"filter": "image_format"},
            {"filter": "image_size"},
            {"filter": "aspect_ratio"},
            {"filter": "decodable"},
            {"filter": "unsafe_content"},
            {"filter": "exact_duplicate"},
            {"filter": "near_duplicate"},
            {"filter": "markup"},  # first text step: the alt-text's tags and entities, before any rule reads it
            {"filter": "boilerplate_drop"},
            {"filter": "boilerplate_crop"},
            {"filter": "emoji"},  # mode "drop": an emoji is no word of the paper's vocabulary
            {"filter": "caption_length"},
            {"filter": "language"},
            {"filter": "pos_presence"},
            {"filter": "noun_ratio"},
            {"filter": "unique_word_ratio"},
            {"filter": "token_repetition"},
            {"filter": "capitalisation"},
            {"filter": "unknown_tokens"},
            {"filter": "polarity"},
            {"filter": "profanity"},
            {"filter": "image_labels"},  # zero-shot labels from the registered CLIP model, for label_overlap
            {"filter": "label_overlap"},
            {"filter": "hypernymize"},
            # The paper's minimum of 100 assumes 3.3M captions; as a share of the run (capped at 100) a
            # first collection is not emptied of every caption with a name.
            {"filter": "rare_entity_types", "params": {"min_share": 0.01}},
        ],
    },
    "conceptual-captions-lowercase": {
        "description": "Conceptual Captions (lower-case sources): the conceptual-captions steps for alt-text "
                       "written in lower case. The first word need not be capitalised (the paper's rule would "
                       "drop nearly every caption); title-case strings are still dropped; emoji are stripped.",
        "steps": [],  # filled below from the conceptual-captions steps
    },
    "ava-captions": {
        "description": "AVA-Captions (seed 000, Sections 3-4): comment cleaning, informativeness "
                       "score with thresholds, images left without comments dropped, LDA topic labels.",
        "steps": [
            {"filter": "comment_clean"},
            {"filter": "informativeness"},
            {"filter": "images_without_comments"},
            {"filter": "lda_topics"},
        ],
    },
    "museum-seeds": {
        "description": "Caption seeds from museum descriptions (seed 001, Section 2): subject-relation-object "
                       "seeds with editable class and relation vocabularies.",
        "steps": [
            {"filter": "caption_length", "params": {"max_tokens": 400}},
            {"filter": "caption_seeds"},
        ],
    },
}


PRESETS["conceptual-captions-lowercase"]["steps"] = _lower_case_variant(PRESETS["conceptual-captions"]["steps"])


def available_steps(steps: list[dict]) -> list[dict]:
    """The preset's steps whose filters are installed (all of them in a complete checkout)."""
    from . import registry

    known = registry.load_all()
    return [step for step in steps if step["filter"] in known]


def ensure_presets() -> list:
    from ..models import Pipeline

    made = []
    for name, preset in PRESETS.items():
        pipeline, created = Pipeline.objects.get_or_create(
            name=name, defaults={"description": preset["description"], "preset": name,
                                 "steps": available_steps(preset["steps"])})
        made.append(pipeline)
    return made
