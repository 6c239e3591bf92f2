"""The annotator's work pages (``views``, ``urls``) and JSON hot path (``api``: next task, vote)."""
