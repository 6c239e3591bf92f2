"""``torch_threads(n)``: run a block with torch limited to n intra-op threads (0: leave as is).

A head of a few thousand weights trains on a few hundred rows: every operation is microseconds of work,
and two threads spend more time handing it over than computing (measured on the 2-core build machine,
with the workers busy: 5-11 s per fit with torch's default threads, 0.3 s with one)."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def torch_threads(n: int):
    import torch

    n = int(n or 0)
    before = torch.get_num_threads()
    if n > 0 and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n > 0 and torch.get_num_threads() != before:
            torch.set_num_threads(before)
