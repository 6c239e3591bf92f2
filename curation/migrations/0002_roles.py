"""Create the three role groups with their model permissions (used by the Django admin)."""
from django.contrib.auth.management import create_permissions
from django.db import migrations

CURATION_MODELS = ["collection", "image", "caption", "importjob", "importissue"]


def create_roles(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    curation = Permission.objects.filter(content_type__app_label="curation", content_type__model__in=CURATION_MODELS)
    Group.objects.get_or_create(name="annotator")
    curator, _ = Group.objects.get_or_create(name="curator")
    curator.permissions.add(*curation.exclude(codename__startswith="delete_"))
    admin, _ = Group.objects.get_or_create(name="admin")
    admin.permissions.add(*curation)
    admin.permissions.add(*Permission.objects.filter(content_type__app_label="auth"))


class Migration(migrations.Migration):
    dependencies = [
        ("curation", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
