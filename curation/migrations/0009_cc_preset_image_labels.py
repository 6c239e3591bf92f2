"""Pipelines made from the conceptual-captions preset before the model pack get its new ``image_labels`` step,
just before ``label_overlap`` (seed 002 labels each image before comparing labels with the caption). A step a
curator already added or removed elsewhere is left alone: only pipelines that have label_overlap and no
image_labels change."""
from django.db import migrations


def add_image_labels(apps, schema_editor):
    Pipeline = apps.get_model("curation", "Pipeline")
    for pipeline in Pipeline.objects.filter(preset="conceptual-captions"):
        steps = list(pipeline.steps or [])
        names = [s.get("filter") for s in steps if isinstance(s, dict)]
        if "image_labels" in names or "label_overlap" not in names:
            continue
        steps.insert(names.index("label_overlap"), {"filter": "image_labels"})
        pipeline.steps = steps
        pipeline.save(update_fields=["steps"])


class Migration(migrations.Migration):
    dependencies = [("curation", "0008_decision_indexes_per_row")]
    operations = [migrations.RunPython(add_image_labels, migrations.RunPython.noop)]
