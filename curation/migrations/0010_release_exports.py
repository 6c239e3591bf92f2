"""ReleaseExport.verification: the result of the last "re-export and verify"."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("curation", "0009_cc_preset_image_labels"),
    ]

    operations = [
        migrations.AddField(
            model_name="releaseexport",
            name="verification",
            field=models.JSONField(blank=True, default=dict,
                                   help_text="the last re-export and verify: {status, ok, files: [{name, recorded, "
                                             "rewritten, stored, match}], started_at, finished_at, error}"),
        ),
    ]
