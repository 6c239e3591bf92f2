"""Embeddings as data (modeling.embeddings): vectors stored per item and model, the jobs that compute them on
the ``gpu`` queue, FAISS indexes per collection and model, and the searches built on them."""
from .store import caption_vectors, decode_all, from_bytes, image_vectors, open_image, text_vectors, to_bytes

__all__ = ["image_vectors", "caption_vectors", "text_vectors", "open_image", "decode_all", "to_bytes", "from_bytes"]
