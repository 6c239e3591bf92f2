"""Crowd providers: one module per marketplace (see base.py)."""
import importlib

PROVIDER_MODULES = ("inhouse", "linkout", "mturk")


def load_all() -> None:
    for name in PROVIDER_MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:  # a module still being written must not break the others
            if exc.name != f"{__name__}.{name}":
                raise
