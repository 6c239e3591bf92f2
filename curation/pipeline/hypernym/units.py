"""A piece of a rewrite's output: an original token, or a hypernym standing for a span of tokens."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Unit:
    """One piece of the output: an original token or a hypernym standing for a span of tokens."""

    text: str
    first: int
    last: int
    token: object = None  # the spaCy token, for original tokens
    entity_type: str | None = None  # the hypernym (singular) this unit stands for
    mentions: tuple = ()

    @property
    def is_punct(self) -> bool:
        return self.token is not None and (self.token.is_punct or self.token.is_space)
