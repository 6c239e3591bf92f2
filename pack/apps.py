from django.apps import AppConfig


class PackConfig(AppConfig):
    """The model pack and embeddings (issue 34): pretrained models from local files, the vectors of images and
    texts they compute, FAISS indexes and the searches on them. Imports the kernel and curation's models only."""

    name = "pack"
    label = "pack"
    verbose_name = "Model pack"
