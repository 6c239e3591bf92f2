"""Crowd providers: one module per marketplace (see base.py). Each module registers itself when
imported; ``load_all`` imports them all (a broken module fails loudly, it is never skipped)."""
import importlib

PROVIDER_MODULES = ("inhouse", "linkout", "mturk")


def load_all() -> None:
    for name in PROVIDER_MODULES:
        importlib.import_module(f"{__name__}.{name}")
