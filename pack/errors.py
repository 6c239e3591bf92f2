"""The model pack's one error type: a message a person can act on, a code for the API, the form field at fault."""
from __future__ import annotations


class PackError(Exception):
    def __init__(self, message: str, code: str = "invalid", field: str | None = None):
        super().__init__(message)
        self.message, self.code, self.field = message, code, field

    def __str__(self):
        return self.message
