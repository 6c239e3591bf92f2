"""The model pack's models moved from modeling to the pack app (issue 34) with state-only migrations: rows written
before the move are read through the pack's models after it, from the same tables, and the content types (with
their permissions) are renamed, not recreated."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("modeling", "0005_trainingrun_heartbeat"), ("pack", None)]
AFTER = [("modeling", "0006_move_pack_models_to_pack_app"), ("pack", "0001_initial")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state([t for t in targets if t[1]]).apps


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_are_read_through_the_pack_models_after_it():
    try:
        old = _migrate(BEFORE)
        assert "pack" not in {m._meta.app_label for m in old.get_models()}
        ContentType = old.get_model("contenttypes", "ContentType")
        Permission = old.get_model("auth", "Permission")
        # The content type as a database from before the move holds it (the test database was built with pack's).
        ContentType.objects.filter(model="pretrainedmodel").delete()
        old_ct = ContentType.objects.create(app_label="modeling", model="pretrainedmodel")
        Permission.objects.create(content_type=old_ct, codename="view_pretrainedmodel",
                                  name="Can view pretrained model")

        Collection = old.get_model("curation", "Collection")
        PretrainedModel = old.get_model("modeling", "PretrainedModel")
        EmbeddingJob = old.get_model("modeling", "EmbeddingJob")
        TextEmbedding = old.get_model("modeling", "TextEmbedding")
        collection = Collection.objects.create(name="before the move")
        model = PretrainedModel.objects.create(name="clip-old", kind="clip", architecture="CLIPModel",
                                               directory="clip-old", files={"model.safetensors": "ab" * 32},
                                               weights_sha256="cd" * 32, licence="MIT", embedding_dim=8)
        job = EmbeddingJob.objects.create(collection_id=collection.pk, model=model, status="done", total=3, done=3)
        TextEmbedding.objects.create(encoder="clip-old@cdcdcdcdcdcd", text_sha256="ef" * 32, dim=2,
                                     vector=b"\0" * 8)

        _migrate(AFTER)
        from django.contrib.auth.models import Permission as LivePermission
        from django.contrib.contenttypes.models import ContentType as LiveContentType

        from pack.models import EmbeddingJob as PackJob
        from pack.models import PretrainedModel as PackModel
        from pack.models import TextEmbedding as PackText

        assert PackModel._meta.db_table == "modeling_pretrainedmodel"
        moved = PackModel.objects.get(pk=model.pk)
        assert (moved.name, moved.key, moved.licence) == ("clip-old", "clip-old@cdcdcdcdcdcd", "MIT")
        moved_job = PackJob.objects.select_related("model").get(pk=job.pk)
        assert (moved_job.model, moved_job.collection_id, moved_job.done) == (moved, collection.pk, 3)
        assert list(moved.jobs.all()) == [moved_job]
        assert PackText.objects.filter(encoder=moved.key).count() == 1

        LiveContentType.objects.clear_cache()
        ct = LiveContentType.objects.get_for_model(PackModel)
        assert (ct.pk, ct.app_label) == (old_ct.pk, "pack")  # renamed in place, its permissions kept
        assert LivePermission.objects.filter(content_type=ct, codename="view_pretrainedmodel").exists()
        assert not LiveContentType.objects.filter(app_label="modeling", model="pretrainedmodel").exists()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
