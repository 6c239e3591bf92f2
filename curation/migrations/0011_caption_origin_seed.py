"""Caption.Origin.SEED: the seeds a run's caption_seeds step found, as child captions of the description."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("curation", "0010_release_exports"),
    ]

    operations = [
        migrations.AlterField(
            model_name="caption",
            name="origin",
            field=models.CharField(choices=[("alt_text", "Web alt-text"), ("web_comment", "Web comment"),
                                            ("museum", "Museum description"), ("dataset", "Existing dataset"),
                                            ("crowd", "Crowd-written"), ("translated", "Machine-translated"),
                                            ("model", "Model-generated"), ("transformed", "Transformed"),
                                            ("seed", "Caption seed")], max_length=16),
        ),
    ]
