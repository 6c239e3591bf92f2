"""``Image.file_stat`` (a database default too: the importers insert images with COPY and raw INSERTs): the stored file's size, modification and change times and inode when its bytes last
hashed to the image's sha256 (empty until the file is written by an import or hashed by an export)."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("curation", "0012_cc_preset_markup"),
    ]

    operations = [
        migrations.AddField(
            model_name="image",
            name="file_stat",
            field=models.CharField(blank=True, db_default="", default="", max_length=100),
        ),
    ]
