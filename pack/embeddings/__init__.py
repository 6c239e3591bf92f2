"""Embeddings as data (pack.embeddings): vectors stored per item and model, the jobs that compute them on
the ``gpu`` queue, FAISS indexes per collection and model, and the searches built on them."""

__all__ = ["image_vectors", "caption_vectors", "text_vectors", "open_image", "decode_all", "to_bytes", "from_bytes"]


def __getattr__(name: str):
    # store (numpy) is imported on first use: the web imports .jobs for the embedding API and needs no numpy
    # to queue a job or report its progress.
    if name in __all__:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
