"""The release models moved from curation to the releases app with state-only migrations: a database migrated to
before the move, holding a release with an item and an export and a training run on it, keeps every row, and
the new app's models (and modeling's foreign key) read them; the content types follow the models."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("curation", "0013_image_file_stat"), ("modeling", "0005_trainingrun_heartbeat"),
          ("contenttypes", "0002_remove_content_type_name"), ("releases", None)]
AFTER = [("curation", "0014_release_models_to_releases_app"), ("releases", "0001_initial"),
         ("modeling", "0007_release_fks_to_releases_app")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


@pytest.mark.django_db(transaction=True)
def test_rows_made_before_the_move_are_read_through_the_releases_app():
    old = _migrate(BEFORE)
    Collection = old.get_model("curation", "Collection")
    Image = old.get_model("curation", "Image")
    Caption = old.get_model("curation", "Caption")
    Release = old.get_model("curation", "Release")
    ReleaseItem = old.get_model("curation", "ReleaseItem")
    ReleaseExport = old.get_model("curation", "ReleaseExport")
    TrainingRun = old.get_model("modeling", "TrainingRun")
    ContentType = old.get_model("contenttypes", "ContentType")
    ContentType.objects.get_or_create(app_label="curation", model="release")

    collection = Collection.objects.create(name="before the move")
    image = Image.objects.create(collection=collection, sha256="a" * 64)
    caption = Caption.objects.create(image=image, text="a dog on a beach", text_hash="b" * 64, origin="dataset")
    release = Release.objects.create(name="v1", status="frozen", items_total=1, content_hash="c" * 64)
    ReleaseItem.objects.create(release=release, position=0, split="train", image=image, image_sha256="a" * 64,
                               image_file="images/a.jpg", caption=caption, text="a dog on a beach",
                               provenance={"lineage": [{"caption": caption.pk}]})
    ReleaseExport.objects.create(release=release, format="jsonl", status="done", sha256="d" * 64)
    TrainingRun.objects.create(name="on v1", kind="captioner", release=release)

    _migrate(AFTER)

    from django.contrib.contenttypes.models import ContentType as CurrentContentType

    from modeling import models as modeling_models
    from releases import models as releases_models

    Moved, MovedItem, MovedExport = (releases_models.Release, releases_models.ReleaseItem,
                                     releases_models.ReleaseExport)

    moved = Moved.objects.get(name="v1")
    assert (moved.pk, moved.status, moved.items_total, moved.content_hash) == (release.pk, "frozen", 1, "c" * 64)
    item = MovedItem.objects.get(release=moved)
    assert (item.position, item.split, item.text, item.image_id, item.caption_id) == (
        0, "train", "a dog on a beach", image.pk, caption.pk)
    assert item.provenance == {"lineage": [{"caption": caption.pk}]}
    assert list(MovedExport.objects.filter(release=moved).values_list("format", "sha256")) == [("jsonl", "d" * 64)]
    assert modeling_models.TrainingRun.objects.get(name="on v1").release == moved
    assert Moved._meta.db_table == "curation_release"
    assert CurrentContentType.objects.filter(app_label="releases", model="release").exists()
    assert not CurrentContentType.objects.filter(app_label="curation", model="release").exists()
