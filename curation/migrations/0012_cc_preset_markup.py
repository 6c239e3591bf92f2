"""Pipelines made from the conceptual-captions presets before the ``markup`` step existed get it as their first
text step, just before ``boilerplate_drop`` (web alt-text carries tags and entities that every later rule would
otherwise read as words). A pipeline a curator already changed there (no boilerplate_drop, or markup present) is
left alone."""
from django.db import migrations

PRESETS = ("conceptual-captions", "conceptual-captions-lowercase")


def add_markup(apps, schema_editor):
    Pipeline = apps.get_model("curation", "Pipeline")
    for pipeline in Pipeline.objects.filter(preset__in=PRESETS):
        steps = list(pipeline.steps or [])
        names = [s.get("filter") for s in steps if isinstance(s, dict)]
        if "markup" in names or "boilerplate_drop" not in names:
            continue
        steps.insert(names.index("boilerplate_drop"), {"filter": "markup"})
        pipeline.steps = steps
        pipeline.save(update_fields=["steps"])


class Migration(migrations.Migration):
    dependencies = [("curation", "0011_caption_origin_seed")]
    operations = [migrations.RunPython(add_markup, migrations.RunPython.noop)]
