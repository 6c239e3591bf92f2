"""The per-chunk funnel counters are gone (the funnel is one GROUP BY over a run's decisions): drop their column."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('curation', '0014_release_models_to_releases_app'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='runchunk',
            name='counts',
        ),
    ]
