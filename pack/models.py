"""The model pack's models: pretrained models registered from local files (pack.catalogue), the vectors of
images and texts they compute (pack.embeddings), the jobs that compute them and the FAISS indexes built on them.

They were the modeling app's until issue 34; their tables keep the names they had (``modeling_*``).
"""
from django.conf import settings
from django.db import models
from django.urls import reverse


class TextEmbedding(models.Model):
    """A sentence encoder's embedding of one text, cached by the text's sha256 (modeling.encoders and
    pack.embeddings.store).

    ``encoder`` names the encoder and the checksum of its weights (``minilm-l6-v2@1a2b3c4d5e6f``), so a
    changed model never reads another model's vectors. ``vector`` is float32, little-endian."""

    encoder = models.CharField(max_length=80)
    text_sha256 = models.CharField(max_length=64)
    dim = models.PositiveSmallIntegerField()
    vector = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "modeling_textembedding"  # the table it had in the modeling app
        constraints = [models.UniqueConstraint(fields=["encoder", "text_sha256"], name="text_embedding_unique")]


class PretrainedModel(models.Model):
    """A pretrained model directory in the model pack (pack.catalogue): a CLIP-family image-text model or a
    sentence-transformers text encoder, in Hugging Face format, registered with the sha256 of every file.

    ``key`` (``name@<12 hex of the weights' hashes>``) is what embeddings, decisions and releases record: a
    changed directory is refused at load time, and a re-registered one gets a new key, so vectors of one model
    version are never read as another's."""

    class Kind(models.TextChoices):
        CLIP = "clip", "Image-text (CLIP family)"
        TEXT = "text", "Sentence encoder"
        VISION = "vision", "Image encoder (ViT, ResNet, ConvNeXt...)"

    name = models.SlugField(max_length=80, unique=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    architecture = models.CharField(max_length=80, help_text="config.json's architecture, e.g. CLIPModel")
    directory = models.CharField(max_length=1000, help_text="absolute, or relative to CAPTIONLAB_MODELS_DIR")
    files = models.JSONField(default=dict, help_text="relative path -> sha256 of every file")
    weights_sha256 = models.CharField(max_length=64)
    parameters = models.PositiveBigIntegerField(default=0)
    embedding_dim = models.PositiveIntegerField(default=0)
    licence = models.CharField(max_length=300)
    source = models.TextField(blank=True, help_text="where the directory came from")
    packaged = models.BooleanField(default=False, help_text="shipped inside an installed Python package")
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "modeling_pretrainedmodel"  # the table it had in the modeling app
        ordering = ["kind", "name"]

    def __str__(self):
        return self.key

    @property
    def key(self) -> str:
        return f"{self.name}@{self.weights_sha256[:12]}"

    def get_absolute_url(self):
        return reverse("pretrained-detail", args=[self.pk])


class ImageEmbedding(models.Model):
    """One image's embedding by one pretrained model (float32, little-endian, L2-normalised). ``vector`` is
    empty and ``error`` says why when the image could not be read or decoded: a re-run skips it too."""

    model = models.ForeignKey(PretrainedModel, on_delete=models.CASCADE, related_name="+")
    image = models.ForeignKey("curation.Image", on_delete=models.CASCADE, related_name="+", db_index=False)
    collection = models.ForeignKey("curation.Collection", on_delete=models.CASCADE, related_name="+")
    dim = models.PositiveSmallIntegerField(default=0)
    vector = models.BinaryField(default=b"")
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "modeling_imageembedding"  # the table it had in the modeling app
        constraints = [models.UniqueConstraint(fields=["model", "image"], name="image_embedding_unique")]
        indexes = [models.Index(fields=["model", "collection"], name="image_embedding_coll")]


class EmbeddingJob(models.Model):
    """Image and caption embeddings of a collection by one model, then its FAISS indexes: a task on the
    ``gpu`` queue with its progress here. Safe to run twice: what is stored is skipped."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Embedding"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    collection = models.ForeignKey("curation.Collection", on_delete=models.CASCADE, related_name="embedding_jobs")
    model = models.ForeignKey(PretrainedModel, on_delete=models.CASCADE, related_name="jobs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=40, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    device = models.CharField(max_length=40, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "modeling_embeddingjob"  # the table it had in the modeling app
        ordering = ["-created_at"]

    def get_absolute_url(self):
        return reverse("embedding-job-detail", args=[self.pk])


class VectorIndex(models.Model):
    """A FAISS index of one collection's image or caption vectors by one model, saved to storage. The ids in
    the index are image ids (kind image) or caption ids (kind caption)."""

    class Target(models.TextChoices):
        IMAGE = "image", "Images"
        CAPTION = "caption", "Captions"

    collection = models.ForeignKey("curation.Collection", on_delete=models.CASCADE, related_name="+")
    model = models.ForeignKey(PretrainedModel, on_delete=models.CASCADE, related_name="+")
    target = models.CharField(max_length=8, choices=Target.choices)
    file = models.FileField(upload_to="indexes/", max_length=300)
    count = models.PositiveIntegerField(default=0)
    index_type = models.CharField(max_length=40)
    params = models.JSONField(default=dict, blank=True)
    built_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "modeling_vectorindex"  # the table it had in the modeling app
        constraints = [models.UniqueConstraint(fields=["collection", "model", "target"], name="vector_index_unique")]
