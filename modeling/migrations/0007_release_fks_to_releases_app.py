"""TrainingRun.release and FeatureCache.release point at the release models' new app (``releases``); the
table they reference (``curation_release``) and the columns and constraints are unchanged, so only Django's
state moves. Runs before curation drops the models from its state."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('modeling', '0006_move_pack_models_to_pack_app'),
        ('releases', '0001_initial'),
    ]
    run_before = [
        ('curation', '0014_release_models_to_releases_app'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='featurecache',
                    name='release',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='feature_caches', to='releases.release'),
                ),
                migrations.AlterField(
                    model_name='trainingrun',
                    name='release',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='training_runs', to='releases.release'),
                ),
            ],
            database_operations=[],  # same table, same columns and constraints
        ),
    ]
