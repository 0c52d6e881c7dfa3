"""Suite parameters: the typed schema each suite file declares, and resolving overrides.

A run stores every parameter it used, defaults included, so overrides are resolved against
the whole schema here. An unknown key is an error listing the valid ones: a silently ignored
override would measure something other than what was asked for. Values arrive as strings
(`--param k=v`) or already typed (a BENCH.toml entry's `params` table); both are checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import BenchError

PARAM_TYPES = ("int", "float", "str", "bool", "int_list")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter: `minimum` bounds numbers (each element of an int_list)."""

    name: str
    type: str
    default: Any
    description: str
    minimum: float | None = None

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter {self.name!r}: type {self.type!r} is not one of "
                             f"{', '.join(PARAM_TYPES)}")
        object.__setattr__(self, "default", self.coerce(self.default))

    def coerce(self, value: Any) -> Any:
        """`value` as this parameter's type; ValueError saying what was expected."""
        parsed = _parse(self.type, value) if isinstance(value, str) else _check(self.type,
                                                                                 value)
        if parsed is None:
            raise ValueError(f"{self.name} must be {_EXPECTED[self.type]}, got {value!r}")
        numbers = parsed if self.type == "int_list" else [parsed]
        if self.minimum is not None and self.type in ("int", "float", "int_list"):
            low = [n for n in numbers if n < self.minimum]
            if low:
                raise ValueError(f"{self.name} must be >= {self.minimum:g}, got {low[0]}")
        return parsed

    def render(self, value: Any) -> str:
        """The value as `--param` would spell it."""
        if self.type == "int_list":
            return ",".join(str(v) for v in value)
        if self.type == "bool":
            return "true" if value else "false"
        return str(value)


_EXPECTED = {"int": "an integer", "float": "a number", "str": "a string",
             "bool": "true or false", "int_list": "comma-separated integers (e.g. 1,2,4)"}


def _parse(kind: str, text: str) -> Any:
    text = text.strip() if kind != "str" else text
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            value = float(text)
            return value if math.isfinite(value) else None
        if kind == "int_list":
            items = [int(part) for part in text.split(",")]
            return tuple(items) if items else None
    except ValueError:
        return None
    if kind == "bool":
        lowered = text.lower()
        return True if lowered in _TRUE else False if lowered in _FALSE else None
    return text


def _check(kind: str, value: Any) -> Any:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if kind == "int":
        return value if is_int else None
    if kind == "float":
        ok = (is_int or isinstance(value, float)) and math.isfinite(value)
        return float(value) if ok else None
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if kind == "int_list":
        items = list(value) if isinstance(value, (list, tuple)) else None
        if not items or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return None
        return tuple(items)
    return value if isinstance(value, str) else None


def resolve_params(suite_id: str, schema: Sequence[ParamSpec],
                   overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter of the suite: the defaults with `overrides` applied and checked."""
    by_name = {p.name: p for p in schema}
    unknown = sorted(set(overrides) - set(by_name))
    if unknown:
        raise BenchError(f"suite {suite_id} has no parameter {', '.join(map(repr, unknown))}; "
                         f"valid keys: {', '.join(sorted(by_name))}")
    resolved = {p.name: p.default for p in schema}
    for name, value in overrides.items():
        try:
            resolved[name] = by_name[name].coerce(value)
        except ValueError as exc:
            raise BenchError(f"suite {suite_id}: {exc}") from None
    return resolved


def parse_assignments(pairs: Sequence[str]) -> dict[str, str]:
    """`["k=v", ...]` from the command line; the value may itself contain '='."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"--param expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out
