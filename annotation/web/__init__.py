"""The annotation app's web layer, grouped by who uses it.

- ``annotator``: the work pages (``views``, ``urls``) and the hot path as JSON, fetch the next task
  and submit a vote (``api``);
- ``curator``: the campaign pages (``views``, ``urls``) and the campaigns API (``api``: the campaign
  viewset, which also serves annotators their reduced view; ``api_results``; ``api_verify``);
- ``crowd``: the entry points of external workers: link-out start, consent and Finish with the
  curator's provider page (``linkout``, ``linkout_urls``), and the MTurk ExternalQuestion page
  (``mturk``, ``mturk_urls``).

``annotation.urls`` (pages) and ``annotation.api_urls`` (under ``/api/``) include them all; the
project's ``config.urls`` includes those two.
"""
