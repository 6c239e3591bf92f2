"""The curation pipeline: filters and transforms as small versioned units, run over chunks.

``base`` defines the unit and what it sees (Item) and says (Decision); ``registry`` names them;
the filter modules (``image_filters``, ``text_filters``, ``overlap``, ``hypernym``,
``informativeness``, ``seeds``, ``topics``) implement the seed papers' methods; ``executor``
runs a pipeline over a collection; ``presets`` holds the seed-named pipelines.
"""
