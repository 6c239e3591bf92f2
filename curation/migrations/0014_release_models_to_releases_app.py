"""Release, ReleaseItem and ReleaseExport now belong to the ``releases`` app (releases.0001_initial), which
keeps their tables: they leave curation's state only, and no table, row or constraint changes. The apps whose
foreign keys pointed at them (modeling.0007_release_fks_to_releases_app) declare that they run first."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('curation', '0013_image_file_stat'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='ReleaseItem'),
                migrations.DeleteModel(name='ReleaseExport'),
                migrations.DeleteModel(name='Release'),
            ],
            database_operations=[],  # the tables are the releases app's now
        ),
    ]
