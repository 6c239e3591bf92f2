"""The release models move here from the curation app, tables and rows kept.

Release, ReleaseItem and ReleaseExport were curation's (curation.0004_releases, 0010_release_exports); their
tables keep their names (``curation_release``, ``curation_releaseitem``, ``curation_releaseexport``, with
their indexes and constraints), so this migration creates the models in Django's state only and changes no
table. With it: modeling.0007_release_fks_to_releases_app points TrainingRun.release and FeatureCache.release
here (state only) and curation.0014_release_models_to_releases_app drops the models from curation's state.
The content types (and with them permissions and admin log entries) are renamed from curation to releases.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODELS = ("release", "releaseitem", "releaseexport")


def rename_content_types(apps, schema_editor, old="curation", new="releases"):
    """The three models' content types move to the new app label; where one already exists under the new
    label (created by an earlier post_migrate), the old one is left alone rather than collide with it."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MODELS:
        if ContentType.objects.using(db).filter(app_label=new, model=model).exists():
            continue
        ContentType.objects.using(db).filter(app_label=old, model=model).update(app_label=new)


def restore_content_types(apps, schema_editor):
    rename_content_types(apps, schema_editor, old="releases", new="curation")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('curation', '0013_image_file_stat'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Release',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=200, unique=True)),
                        ('description', models.TextField(blank=True)),
                        ('config', models.JSONField(default=dict, help_text='selection, vote rules, caps, dedup, splits, seed')),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('freezing', 'Freezing'), ('frozen', 'Frozen'), ('failed', 'Failed')], default='queued', max_length=10)),
                        ('items_total', models.PositiveIntegerField(default=0)),
                        ('items_done', models.PositiveIntegerField(default=0)),
                        ('counts', models.JSONField(blank=True, default=dict, help_text='images and captions per split')),
                        ('report', models.JSONField(blank=True, default=list, help_text='what was left out, and why')),
                        ('content_hash', models.CharField(blank=True, help_text='sha256 of the canonical manifest', max_length=64)),
                        ('card', models.TextField(blank=True, help_text='the dataset card (Markdown)')),
                        ('error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('frozen_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'curation_release',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='ReleaseExport',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('format', models.CharField(choices=[('coco', 'COCO captions JSON'), ('karpathy', 'Karpathy-split JSON (dataset_coco.json)'), ('jsonl', 'JSON Lines'), ('csv', 'CSV'), ('parquet', 'Parquet (Hugging Face datasets)'), ('webdataset', 'WebDataset tar shards')], max_length=12)),
                        ('options', models.JSONField(blank=True, default=dict, help_text='e.g. shard_size for WebDataset')),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Writing'), ('done', 'Done'), ('failed', 'Failed')], default='queued', max_length=8)),
                        ('rows_total', models.PositiveIntegerField(default=0)),
                        ('rows_done', models.PositiveIntegerField(default=0)),
                        ('files', models.JSONField(blank=True, default=list, help_text='[{name, size, sha256}] in storage')),
                        ('sha256', models.CharField(blank=True, help_text='of the file, or of the shard list', max_length=64)),
                        ('size', models.PositiveBigIntegerField(default=0)),
                        ('report', models.JSONField(blank=True, default=list)),
                        ('error', models.TextField(blank=True)),
                        ('attempts', models.PositiveSmallIntegerField(default=0)),
                        ('verification', models.JSONField(blank=True, default=dict, help_text='the last re-export and verify: {status, ok, files: [{name, recorded, rewritten, stored, match}], started_at, finished_at, error}')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('release', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='exports', to='releases.release')),
                    ],
                    options={
                        'db_table': 'curation_releaseexport',
                        'ordering': ['release', 'format', '-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='ReleaseItem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('position', models.PositiveIntegerField(help_text="stable order of the release's rows")),
                        ('split', models.CharField(choices=[('train', 'Train'), ('val', 'Validation'), ('test', 'Test')], max_length=5)),
                        ('image_sha256', models.CharField(max_length=64)),
                        ('image_file', models.CharField(help_text='storage name of the image file', max_length=300)),
                        ('image_format', models.CharField(blank=True, max_length=10)),
                        ('width', models.PositiveIntegerField(null=True)),
                        ('height', models.PositiveIntegerField(null=True)),
                        ('license', models.CharField(blank=True, max_length=300)),
                        ('credit', models.CharField(blank=True, max_length=500)),
                        ('external_id', models.CharField(blank=True, max_length=300)),
                        ('text', models.TextField()),
                        ('language', models.CharField(blank=True, max_length=16)),
                        ('human_verified', models.BooleanField(default=False)),
                        ('provenance', models.JSONField(default=dict, help_text='lineage, decisions, overrides, votes, model versions')),
                        ('caption', models.ForeignKey(db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='curation.caption')),
                        ('image', models.ForeignKey(db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='curation.image')),
                        ('release', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='items', to='releases.release')),
                    ],
                    options={
                        'db_table': 'curation_releaseitem',
                        'ordering': ['release', 'position'],
                        'indexes': [models.Index(fields=['release', 'split', 'position'], name='curation_re_release_f5c11e_idx')],
                        'constraints': [models.UniqueConstraint(fields=('release', 'position'), name='release_item_position')],
                    },
                ),
            ],
            database_operations=[],  # the tables are curation's, unchanged
        ),
        migrations.RunPython(rename_content_types, restore_content_types),
    ]
