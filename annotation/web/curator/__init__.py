"""The curator's campaign pages (``views``, ``urls``) and the campaigns API (``api``, ``api_results``,
``api_verify``)."""
