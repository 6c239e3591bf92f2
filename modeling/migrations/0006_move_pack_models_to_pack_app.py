"""The model pack's models (PretrainedModel, TextEmbedding, ImageEmbedding, EmbeddingJob, VectorIndex) move to the
pack app (issue 34). State only: the tables keep their names (the pack's models set db_table), so no row moves.
FeatureCache.model now points at pack.PretrainedModel (the same table, the same constraint). The content types
(and with them the permissions and admin log entries) are renamed from modeling to pack."""
import django.db.models.deletion
from django.db import migrations, models

MOVED = ("pretrainedmodel", "textembedding", "imageembedding", "embeddingjob", "vectorindex")


def content_types_to(app_label, other):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        db = schema_editor.connection.alias
        for model in MOVED:
            if ContentType.objects.using(db).filter(app_label=app_label, model=model).exists():
                continue  # created already (by a post_migrate signal): leave both as they are
            ContentType.objects.using(db).filter(app_label=other, model=model).update(app_label=app_label)
        ContentType.objects.clear_cache()
    return move


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('modeling', '0005_trainingrun_heartbeat'),
        ('pack', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='featurecache',
                    name='model',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='feature_caches',
                                            to='pack.pretrainedmodel'),
                ),
                migrations.DeleteModel(name='ImageEmbedding'),
                migrations.DeleteModel(name='EmbeddingJob'),
                migrations.DeleteModel(name='VectorIndex'),
                migrations.DeleteModel(name='TextEmbedding'),
                migrations.DeleteModel(name='PretrainedModel'),
            ],
        ),
        migrations.RunPython(content_types_to("pack", "modeling"), content_types_to("modeling", "pack")),
    ]
