"""The one exception routing raises for a refused request."""
from __future__ import annotations


class RoutingError(Exception):
    """A refused request, with the HTTP status that says why."""

    def __init__(self, message: str, code: str, status: int = 400):
        super().__init__(message)
        self.message, self.code, self.status = message, code, status
