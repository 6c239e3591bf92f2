"""Signals annotation sends to the apps above it, which connect to them in their ``AppConfig.ready()``.

- ``aggregation_finished``: an aggregation pass of a campaign (``tasks.aggregate_campaign``: full, changes or
  due) has counted the votes; keyword ``campaign_id``. Modeling starts a learning loop's automatic round
  from it (a loop set to run every N votes). Sent with ``send``: a receiver's exception fails the task,
  as a direct call did.
"""
from django.dispatch import Signal

aggregation_finished = Signal()

__all__ = ["aggregation_finished"]
