from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0002_providers"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="annotator_question",
            field=models.CharField(blank=True, help_text="the question annotators read on each item; empty: the kind's own question", max_length=300),
        ),
    ]
