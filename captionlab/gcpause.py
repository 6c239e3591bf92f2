"""``cyclic_gc_paused()``: run a block with Python's cyclic garbage collector off.

For work that makes many short-lived objects none of which forms a cycle (a filter chunk's parses
and decision rows, a results table's row dicts): each collection during the block would walk
everything made so far again; after it, reference counting frees them and the next collection
finds little. The caller keeps the block bounded, since cycles made inside wait until it ends.
"""
import gc
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
