"""The model pack's models move from the modeling app (issue 34): state only. Their tables stay where modeling's
migrations 0002 and 0003 created them (db_table "modeling_*"); modeling's migration
0006_move_pack_models_to_pack_app drops them from modeling's state and renames their content types."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('curation', '0013_image_file_stat'),
        ('modeling', '0005_trainingrun_heartbeat'),  # the tables exist before the pack takes them over
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='PretrainedModel',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.SlugField(max_length=80, unique=True)),
                        ('kind', models.CharField(choices=[('clip', 'Image-text (CLIP family)'), ('text', 'Sentence encoder'), ('vision', 'Image encoder (ViT, ResNet, ConvNeXt...)')], max_length=8)),
                        ('architecture', models.CharField(help_text="config.json's architecture, e.g. CLIPModel", max_length=80)),
                        ('directory', models.CharField(help_text='absolute, or relative to CAPTIONLAB_MODELS_DIR', max_length=1000)),
                        ('files', models.JSONField(default=dict, help_text='relative path -> sha256 of every file')),
                        ('weights_sha256', models.CharField(max_length=64)),
                        ('parameters', models.PositiveBigIntegerField(default=0)),
                        ('embedding_dim', models.PositiveIntegerField(default=0)),
                        ('licence', models.CharField(max_length=300)),
                        ('source', models.TextField(blank=True, help_text='where the directory came from')),
                        ('packaged', models.BooleanField(default=False, help_text='shipped inside an installed Python package')),
                        ('added_at', models.DateTimeField(auto_now_add=True)),
                        ('added_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'modeling_pretrainedmodel',
                        'ordering': ['kind', 'name'],
                    },
                ),
                migrations.CreateModel(
                    name='EmbeddingJob',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Embedding'), ('done', 'Done'), ('failed', 'Failed')], default='queued', max_length=10)),
                        ('stage', models.CharField(blank=True, max_length=40)),
                        ('total', models.PositiveIntegerField(default=0)),
                        ('done', models.PositiveIntegerField(default=0)),
                        ('failed', models.PositiveIntegerField(default=0)),
                        ('device', models.CharField(blank=True, max_length=40)),
                        ('summary', models.JSONField(blank=True, default=dict)),
                        ('error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('collection', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='embedding_jobs', to='curation.collection')),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='jobs', to='pack.pretrainedmodel')),
                    ],
                    options={
                        'db_table': 'modeling_embeddingjob',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='TextEmbedding',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('encoder', models.CharField(max_length=80)),
                        ('text_sha256', models.CharField(max_length=64)),
                        ('dim', models.PositiveSmallIntegerField()),
                        ('vector', models.BinaryField()),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'modeling_textembedding',
                        'constraints': [models.UniqueConstraint(fields=('encoder', 'text_sha256'), name='text_embedding_unique')],
                    },
                ),
                migrations.CreateModel(
                    name='ImageEmbedding',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('dim', models.PositiveSmallIntegerField(default=0)),
                        ('vector', models.BinaryField(default=b'')),
                        ('error', models.CharField(blank=True, max_length=300)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('collection', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='curation.collection')),
                        ('image', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='curation.image')),
                        ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='pack.pretrainedmodel')),
                    ],
                    options={
                        'db_table': 'modeling_imageembedding',
                        'indexes': [models.Index(fields=['model', 'collection'], name='image_embedding_coll')],
                        'constraints': [models.UniqueConstraint(fields=('model', 'image'), name='image_embedding_unique')],
                    },
                ),
                migrations.CreateModel(
                    name='VectorIndex',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('target', models.CharField(choices=[('image', 'Images'), ('caption', 'Captions')], max_length=8)),
                        ('file', models.FileField(max_length=300, upload_to='indexes/')),
                        ('count', models.PositiveIntegerField(default=0)),
                        ('index_type', models.CharField(max_length=40)),
                        ('params', models.JSONField(blank=True, default=dict)),
                        ('built_at', models.DateTimeField(auto_now=True)),
                        ('collection', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='curation.collection')),
                        ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='pack.pretrainedmodel')),
                    ],
                    options={
                        'db_table': 'modeling_vectorindex',
                        'constraints': [models.UniqueConstraint(fields=('collection', 'model', 'target'), name='vector_index_unique')],
                    },
                ),
            ],
        ),
    ]
