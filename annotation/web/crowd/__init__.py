"""External crowds' entry points: link-out pages with the curator's provider page (``linkout``,
``linkout_urls``) and the MTurk ExternalQuestion page (``mturk``, ``mturk_urls``)."""
