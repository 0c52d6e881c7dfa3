"""Strict readers for JSON request fields: right type, in range, or a 400 naming the field.

JSON numbers arrive as int or float and booleans are ints in Python, so each reader checks
exactly what the APIs accept (a bool is never a number, an integral float is an integer).
"""

from __future__ import annotations

from typing import Any, Mapping

from .errors import invalid

_MISSING = object()


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def require_object(value: Any, param: str = "body") -> dict:
    if not isinstance(value, dict):
        raise invalid(f"{param} must be a JSON object, got {_type_name(value)}", param)
    return value


class Fields:
    """Typed access to one JSON object; `name` prefixes params in error messages."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "") -> None:
        self.data = data
        self.prefix = prefix

    def _param(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def _get(self, key: str, required: bool) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise invalid(f"{self._param(key)} is required", self._param(key))
            return _MISSING
        return value

    def _bad(self, key: str, want: str, value: Any) -> Exception:
        return invalid(f"{self._param(key)} must be {want}, got {_type_name(value)}",
                       self._param(key))

    def string(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            raise self._bad(key, "a string", value)
        return value

    def boolean(self, key: str, default: Any = None) -> Any:
        value = self._get(key, False)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, "a boolean", value)
        return value

    def integer(self, key: str, default: Any = None, *, lo: int | None = None,
                hi: int | None = None, required: bool = False) -> Any:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(key, "an integer", value)
        self._range(key, value, lo, hi)
        return value

    def number(self, key: str, default: Any = None, *, lo: float | None = None,
               hi: float | None = None, lo_open: bool = False) -> Any:
        value = self._get(key, False)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(key, "a number", value)
        if lo_open and lo is not None and value <= lo:
            raise invalid(f"{self._param(key)}={value} must be greater than {lo}",
                          self._param(key))
        self._range(key, value, lo, hi)
        return float(value)

    def array(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if not isinstance(value, list):
            raise self._bad(key, "an array", value)
        return value

    def obj(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if not isinstance(value, dict):
            raise self._bad(key, "an object", value)
        return value

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def _range(self, key: str, value: float, lo: float | None, hi: float | None) -> None:
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
            raise invalid(f"{self._param(key)}={value} is out of range {bounds}",
                          self._param(key))


def string_list(value: Any, param: str, *, max_items: int = 16) -> list[str]:
    """A string or an array of strings (OpenAI `stop`)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"{param} must be a string or an array of strings", param)
    if len(value) > max_items:
        raise invalid(f"{param} accepts at most {max_items} entries", param)
    return list(value)
