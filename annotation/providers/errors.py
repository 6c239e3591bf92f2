"""The error every provider and the money ledger raise (below ``base`` and ``money``, which both use it)."""
from __future__ import annotations


class ProviderError(Exception):
    """A provider refused or could not be reached; ``retryable`` says whether backing off helps."""

    def __init__(self, message: str, *, code: str = "provider_error", retryable: bool = False):
        super().__init__(message)
        self.message, self.code, self.retryable = message, code, retryable
