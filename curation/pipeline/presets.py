"""Pipelines named after the seed papers. ``ensure_presets`` creates them (editable copies) in the
database; a curator edits steps and parameters there."""
from __future__ import annotations

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
            {"filter": "boilerplate_drop"},
            {"filter": "boilerplate_crop"},
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
            {"filter": "rare_entity_types"},
        ],
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
