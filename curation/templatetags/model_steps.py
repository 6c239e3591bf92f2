"""``{% model_step_note run step %}``: the funnel's note on a step that could not use its model ("not run: no
model registered"), from curation.pipeline.model_steps.step_notes, computed once per run and page."""
from django import template

register = template.Library()


@register.simple_tag
def model_step_note(run, step) -> str:
    notes = getattr(run, "_model_step_notes", None)
    if notes is None:
        from curation.pipeline.model_steps import step_notes

        notes = run._model_step_notes = step_notes(run)
    return notes.get(int(step), "")
