"""The pipeline editor's model: the filter catalogue, each step with its parameters as form fields,
parsing what a curator submitted (by the type of each default) and adding, removing, moving steps."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from ..pipeline import registry


def catalogue() -> list:
    """The filters a curator can add: every registered filter but the tests' own."""
    return sorted((cls for name, cls in registry.load_all().items() if not name.startswith("test_")),
                  key=lambda cls: (cls.target, cls.label or cls.name))


def filter_class(name: str):
    try:
        return registry.get(name)
    except KeyError:
        return None


def _kind(default) -> str:
    """How a parameter is edited, from the type of its default value."""
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "text"
    if default is None:
        return "optional"
    if isinstance(default, (list, tuple)) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                  for v in default):
        return "lines"
    return "json"


def _display(kind: str, value):
    if kind == "bool":
        return bool(value)
    if value is None:
        return ""
    if kind in ("int", "float", "text") and isinstance(value, (str, int, float)):
        return str(value)
    if kind == "lines" and isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    if kind == "optional" and isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@dataclass
class ParamField:
    key: str
    kind: str
    default: object
    shown: object  # what the input shows: the submitted text, or the stored value formatted
    value: object = None
    error: str = ""
    name: str = ""

    @property
    def rows(self) -> int:
        return min(max(str(self.shown).count("\n") + 2, 2), 12)

    @property
    def default_text(self) -> str:
        if self.kind == "bool":
            return "on" if self.default else "off"
        if self.default is None or self.default == "" or self.default == [] or self.default == {}:
            return "empty"
        if self.kind == "lines":
            return ", ".join(str(v) for v in self.default)
        if self.kind == "json":
            return json.dumps(self.default, ensure_ascii=False)
        return str(self.default)


@dataclass
class EditorStep:
    filter: str
    cls: object  # the filter class, None when the filter is not installed
    enabled: bool = True
    fields: list[ParamField] = field(default_factory=list)
    raw: str = ""  # the parameters as JSON, for a filter that is not installed
    raw_error: str = ""
    prefix: str = ""

    @property
    def errors(self) -> bool:
        return bool(self.raw_error or any(f.error for f in self.fields))

    def as_step(self) -> dict:
        """The step as stored: only the parameters that differ from the filter's defaults."""
        if self.cls is None:
            try:
                params = json.loads(self.raw or "{}")
            except ValueError:
                params = {}
        else:
            params = {f.key: f.value for f in self.fields if f.value != f.default}
        step = {"filter": self.filter}
        if params:
            step["params"] = params
        if not self.enabled:
            step["enabled"] = False
        return step


def step_from_stored(step: dict) -> EditorStep:
    name = step.get("filter", "") if isinstance(step, dict) else ""
    cls = filter_class(name)
    params = (step.get("params") or {}) if isinstance(step, dict) else {}
    editor = EditorStep(filter=name, cls=cls, enabled=step.get("enabled", True) if isinstance(step, dict) else True)
    if cls is None:
        editor.raw = json.dumps(params, indent=2, ensure_ascii=False)
        return editor
    for key, default in cls.defaults.items():
        kind = _kind(default)
        value = params.get(key, default)
        editor.fields.append(ParamField(key=key, kind=kind, default=default, shown=_display(kind, value), value=value))
    return editor


def _parse(kind: str, default, text: str):
    """The value of one submitted parameter; raises ValueError with a message for the curator."""
    raw, text = text, text.strip()
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError("Enter a whole number.") from None
    if kind == "float":
        try:
            value = float(text)
        except ValueError:
            raise ValueError("Enter a number.") from None
        if not math.isfinite(value):
            raise ValueError("Enter a finite number.")
        return value
    if kind == "text":
        return text
    if kind == "optional":
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text
    if kind == "lines":
        # Lines keep their spaces (a boilerplate pattern may end with one); blank lines go.
        lines = [line for line in raw.splitlines() if line.strip()]
        item_type = type(default[0]) if default else str
        if item_type in (int, float):
            try:
                return [item_type(line) for line in lines]
            except ValueError:
                raise ValueError(f"Each line must be a {'whole ' if item_type is int else ''}number.") from None
        return lines
    try:
        value = json.loads(text) if text else default
    except ValueError as exc:
        raise ValueError(f"Not valid JSON: {exc}") from None
    if isinstance(default, dict) and not isinstance(value, dict):
        raise ValueError("Enter a JSON object: {\"key\": value, …}.")
    if isinstance(default, list) and not isinstance(value, list):
        raise ValueError("Enter a JSON list: [value, …].")
    return value


def steps_from_post(post) -> list[EditorStep]:
    """The editor's steps as submitted, each parameter parsed by the type of its default."""
    try:
        count = min(int(post.get("step-count", "0")), 200)
    except ValueError:
        count = 0
    steps = []
    for i in range(count):
        prefix = f"step-{i}-"
        name = post.get(prefix + "filter", "")
        if not name:
            continue
        cls = filter_class(name)
        step = EditorStep(filter=name, cls=cls, enabled=post.get(prefix + "enabled") == "on")
        if cls is None:
            step.raw = post.get(prefix + "params", "")
            try:
                if not isinstance(json.loads(step.raw or "{}"), dict):
                    step.raw_error = "Enter a JSON object."
            except ValueError as exc:
                step.raw_error = f"Not valid JSON: {exc}"
        else:
            for key, default in cls.defaults.items():
                kind = _kind(default)
                if kind == "bool":
                    value = post.get(prefix + key) == "on"
                    step.fields.append(ParamField(key, kind, default, shown=value, value=value))
                    continue
                text = post.get(prefix + key, _display(kind, default))
                param = ParamField(key, kind, default, shown=text)
                try:
                    param.value = _parse(kind, default, text)
                except ValueError as exc:
                    param.error, param.value = str(exc), default
                step.fields.append(param)
        steps.append(step)
    return steps


def number(steps: list[EditorStep]) -> list[EditorStep]:
    """Give every step and parameter the input names of its current position."""
    for i, step in enumerate(steps):
        step.prefix = f"step-{i}-"
        for param in step.fields:
            param.name = step.prefix + param.key
    return steps


def apply_op(steps: list[EditorStep], op: str, new_filter: str) -> str:
    """Add, remove or move a step in place; returns an error message or ""."""
    action, _, index = op.partition(":")
    if action == "add":
        cls = filter_class(new_filter)
        if cls is None:
            return "Choose a filter to add."
        steps.append(step_from_stored({"filter": cls.name}))
        return ""
    try:
        i = int(index)
    except ValueError:
        return ""
    if not 0 <= i < len(steps):
        return ""
    if action == "remove":
        steps.pop(i)
    elif action == "up" and i > 0:
        steps[i - 1], steps[i] = steps[i], steps[i - 1]
    elif action == "down" and i < len(steps) - 1:
        steps[i + 1], steps[i] = steps[i], steps[i + 1]
    return ""
