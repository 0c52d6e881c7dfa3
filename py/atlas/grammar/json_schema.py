"""JSON Schema -> IR Grammar whose every sentence is a JSON document the schema accepts.

Soundness is the rule: what the grammar can produce must validate. Keywords that would
need more than a grammar (``not``, ``uniqueItems``, ``multipleOf``...) are refused with
UnsupportedSchemaError rather than ignored; annotations (``title``, ``description``...)
are ignored. Choices made for generation, as in OpenAI's strict mode:

* properties come in schema order; ``additionalProperties`` absent means false (strict
  mode, the default) or true (``strict=False``); extra keys, where allowed, come after the
  named ones and are plain strings that differ from them;
* whitespace is bounded: by default one optional space after ``:`` and ``,`` and nowhere
  else (``max_whitespace=n``: up to n of space/newline/tab at every separator), so a model
  cannot loop on whitespace forever;
* ``oneOf`` is treated as ``anyOf`` (the options must not overlap for the output to be
  valid); ``number`` bounds follow `json_numbers`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from .errors import UnsupportedSchemaError
from .ir import (EMPTY, Alt, Cls, Expr, Grammar, Lit, Ref, Rep, Seq, alt, intersect_ranges,
                 opt, seq, subtract_ranges)
from .json_numbers import integer_range, number_range
from .regex import parse_regex

ANNOTATIONS = frozenset({"title", "description", "examples", "default", "$schema", "$id",
                         "$comment", "deprecated", "readOnly", "writeOnly", "$anchor",
                         "contentMediaType", "contentEncoding", "strict", "name"})
UNSUPPORTED = frozenset({"not", "if", "then", "else", "uniqueItems", "multipleOf",
                         "minProperties", "maxProperties", "patternProperties",
                         "propertyNames", "dependentRequired", "dependentSchemas",
                         "dependencies", "contains", "minContains", "maxContains",
                         "unevaluatedProperties", "unevaluatedItems", "$dynamicRef"})

_UNSAFE = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
STRING_CHAR_SAFE = Cls(subtract_ranges(((0, 0x10FFFF),), _UNSAFE))
HEX = Cls(((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)))
_HEX_NOT_D = Cls(((0x30, 0x39), (0x41, 0x43), (0x45, 0x46), (0x61, 0x63), (0x65, 0x66)))
# \uXXXX escapes, minus surrogates (a surrogate pair would decode to one character and
# break minLength/maxLength counting; a lone one is not a character).
_UNICODE_ESCAPE = seq(Lit("u"), alt(seq(_HEX_NOT_D, HEX, HEX, HEX),
                                    seq(Cls(((0x44, 0x44), (0x64, 0x64))),
                                        Cls(((0x30, 0x37),)), HEX, HEX)))
STRING_CHAR = alt(STRING_CHAR_SAFE, seq(Lit("\\"), alt(Cls.of([(c, c) for c in b'"\\/bfnrt']),
                                                        _UNICODE_ESCAPE)))
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r",
                 "\b": "\\b", "\f": "\\f"}

# Sound regular expressions for the string formats whose validity the grammar can carry.
_DATE = r"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
_HOUR_MINUTE = r"([01][0-9]|2[0-3]):[0-5][0-9]"
_TIME = _HOUR_MINUTE + r":[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]" + _HOUR_MINUTE + ")"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LABEL = r"[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*"
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + "T" + _TIME,
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "email": r"[a-zA-Z0-9._%+-]{1,64}@" + _LABEL + r"(\." + _LABEL + r")*\.[a-zA-Z]{2,10}",
    "ipv4": rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}",
    "hostname": _LABEL + r"(\." + _LABEL + r")*",
    "uri": r"https?://" + _LABEL + r"(\." + _LABEL + r")*(/[a-zA-Z0-9._~%!$&'()*+,;=:@-]*)*",
}


def json_text_of_regex(expr: Expr) -> Expr:
    """The JSON-string encoding of what `expr` matches: quote, backslash and the common
    control characters become escapes; other control characters are dropped (a sound
    subset)."""
    if isinstance(expr, Lit):
        return Lit("".join(_JSON_ESCAPES.get(c, c) for c in expr.text
                           if c in _JSON_ESCAPES or ord(c) >= 0x20))
    if isinstance(expr, Cls):
        options: list[Expr] = []
        safe = subtract_ranges(expr.ranges, _UNSAFE)
        if safe:
            options.append(Cls(safe))
        for char, escape in _JSON_ESCAPES.items():
            if intersect_ranges(expr.ranges, ((ord(char), ord(char)),)):
                options.append(Lit(escape))
        return alt(*options) if options else Cls(())
    if isinstance(expr, Seq):
        return seq(*(json_text_of_regex(e) for e in expr.items))
    if isinstance(expr, Alt):
        return alt(*(json_text_of_regex(e) for e in expr.options))
    if isinstance(expr, Rep):
        return Rep(json_text_of_regex(expr.item), expr.min, expr.max)
    return expr


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _size(expr: Expr) -> int:
    if isinstance(expr, Seq):
        return 1 + sum(_size(e) for e in expr.items)
    if isinstance(expr, Alt):
        return 1 + sum(_size(e) for e in expr.options)
    if isinstance(expr, Rep):
        return 1 + _size(expr.item)
    return 1


class SchemaConverter:
    """One schema's conversion; rules are named after the schema path they come from."""

    SHARE_ABOVE = 40         # IR nodes: a larger repeated item becomes a named rule

    def __init__(self, schema: Any, max_whitespace: int | None = None,
                 grammar: Grammar | None = None, prefix: str = "", strict: bool = True) -> None:
        """`grammar`/`prefix`: add the rules to an existing grammar (several schemas in one,
        e.g. one per tool), their names prefixed so they cannot collide. `strict`: an absent
        additionalProperties means false (OpenAI strict mode); otherwise true (JSON Schema)."""
        self.root_schema = schema
        self.strict = strict
        self.grammar = grammar if grammar is not None else Grammar()
        self.prefix = prefix
        if max_whitespace is None:
            self.ws_sep: Expr = opt(Lit(" "))
            self.ws_edge: Expr = EMPTY
        else:
            self.ws_sep = self.ws_edge = Rep(Cls.of([(0x20, 0x20), (0x0A, 0x0A), (0x09, 0x09)]),
                                             0, max_whitespace)
        self._refs: dict[str, str] = {}
        self._counter = 0

    def convert(self) -> Grammar:
        self.grammar.add("root", self.value(self.root_schema, "#"))
        return self.grammar

    def _rule(self, hint: str, expr: Expr | None = None) -> str:
        self._counter += 1
        name = f"{self.prefix}{hint}#{self._counter}"
        if expr is not None:
            self.grammar.add(name, expr)
        return name

    # -- dispatch -------------------------------------------------------------------

    def value(self, schema: Any, path: str) -> Expr:
        if schema is True or schema == {}:
            return Ref(self.any_value())
        if schema is False:
            raise UnsupportedSchemaError(f"{path}: the schema `false` accepts no value")
        if not isinstance(schema, Mapping):
            raise UnsupportedSchemaError(f"{path}: a schema must be an object or a boolean, "
                                         f"got {type(schema).__name__}")
        bad = sorted(k for k in schema if k in UNSUPPORTED and schema[k] not in (False, None))
        if bad:
            raise UnsupportedSchemaError(f"{path}: keyword(s) {bad} cannot be enforced by a "
                                         "grammar")
        if "$ref" in schema:
            return Ref(self.reference(schema["$ref"], path))
        if "const" in schema:
            return Lit(_dump(schema["const"]))
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise UnsupportedSchemaError(f"{path}: enum must be a non-empty array")
            return alt(*(Lit(_dump(v)) for v in values))
        if "allOf" in schema:
            return self.value(self.merge_all_of(schema, path), path)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if not isinstance(options, list) or not options:
                    raise UnsupportedSchemaError(f"{path}: {key} must be a non-empty array")
                base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                return alt(*(self.value({**base, **option} if isinstance(option, Mapping)
                                        else option, f"{path}/{key}/{i}")
                             for i, option in enumerate(options)))
        types = schema.get("type")
        if types is None:
            types = self.infer_type(schema)
            if types is None:
                return Ref(self.any_value())
        if isinstance(types, list):
            if not types:
                raise UnsupportedSchemaError(f"{path}: type must not be an empty array")
            return alt(*(self.typed(schema, t, path) for t in types))
        return self.typed(schema, types, path)

    @staticmethod
    def infer_type(schema: Mapping[str, Any]) -> str | None:
        if any(k in schema for k in ("properties", "required", "additionalProperties")):
            return "object"
        if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems")):
            return "array"
        if any(k in schema for k in ("pattern", "format", "minLength", "maxLength")):
            return "string"
        if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum",
                                     "exclusiveMaximum")):
            return "number"
        return None

    def typed(self, schema: Mapping[str, Any], kind: Any, path: str) -> Expr:
        if kind == "string":
            return self.string(schema, path)
        if kind in ("integer", "number"):
            return self.number(schema, kind == "integer", path)
        if kind == "boolean":
            return alt(Lit("true"), Lit("false"))
        if kind == "null":
            return Lit("null")
        if kind == "object":
            return self.object(schema, path)
        if kind == "array":
            return self.array(schema, path)
        raise UnsupportedSchemaError(f"{path}: unknown type {kind!r}")

    # -- references -----------------------------------------------------------------

    def reference(self, ref: Any, path: str) -> str:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedSchemaError(f"{path}: only local references (#/...) are "
                                         f"supported, got {ref!r}")
        if ref not in self._refs:
            target: Any = self.root_schema
            for part in [p for p in ref[1:].split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    raise UnsupportedSchemaError(f"{path}: reference {ref!r} does not resolve")
                target = target[part]
            name = self._refs[ref] = self._rule(ref)
            self.grammar.add(name, self.value(target, ref))
        return self._refs[ref]

    def merge_all_of(self, schema: Mapping[str, Any], path: str) -> dict[str, Any]:
        """allOf of object-like schemas: properties and required united, the rest must not
        conflict."""
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        if "additionalProperties" in schema:
            raise UnsupportedSchemaError(f"{path}: additionalProperties beside allOf applies "
                                         "to the outer properties only; put it in the parts")
        for i, part in enumerate(schema["allOf"]):
            if isinstance(part, Mapping) and "$ref" in part:
                part = self._resolve(part["$ref"], f"{path}/allOf/{i}")
            if not isinstance(part, Mapping):
                raise UnsupportedSchemaError(f"{path}/allOf/{i}: must be an object schema")
            for key, value in part.items():
                if key == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required":
                    merged["required"] = list(dict.fromkeys(merged.get("required", []) + value))
                elif key in merged and merged[key] != value and key not in ANNOTATIONS:
                    raise UnsupportedSchemaError(f"{path}/allOf/{i}: conflicting {key!r}")
                else:
                    merged[key] = value
        return merged

    def _resolve(self, ref: str, path: str) -> Any:
        target: Any = self.root_schema
        for part in [p for p in ref.lstrip("#").split("/") if p]:
            if not isinstance(target, Mapping) or part not in target:
                raise UnsupportedSchemaError(f"{path}: reference {ref!r} does not resolve")
            target = target[part]
        return target

    # -- scalars --------------------------------------------------------------------

    def string(self, schema: Mapping[str, Any], path: str) -> Expr:
        pattern, fmt = schema.get("pattern"), schema.get("format")
        min_len, max_len = schema.get("minLength", 0), schema.get("maxLength")
        if pattern is not None or (fmt is not None and fmt in FORMATS):
            if min_len or max_len is not None:
                raise UnsupportedSchemaError(f"{path}: pattern/format together with "
                                             "minLength/maxLength is not supported")
            regex = pattern if pattern is not None else FORMATS[fmt]
            if pattern is not None and fmt in FORMATS:
                raise UnsupportedSchemaError(f"{path}: both pattern and format")
            body = json_text_of_regex(parse_regex(regex))
        else:
            if not isinstance(min_len, int) or min_len < 0 or (
                    max_len is not None and (not isinstance(max_len, int) or max_len < min_len)):
                raise UnsupportedSchemaError(f"{path}: bad minLength/maxLength")
            body = Rep(STRING_CHAR, min_len, max_len)
        return seq(Lit('"'), body, Lit('"'))

    def number(self, schema: Mapping[str, Any], integer: bool, path: str) -> Expr:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        lo_x, hi_x = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        lo_excl = hi_excl = False
        if isinstance(lo_x, (int, float)) and not isinstance(lo_x, bool):
            if lo is None or lo_x >= lo:
                lo, lo_excl = lo_x, True
        if isinstance(hi_x, (int, float)) and not isinstance(hi_x, bool):
            if hi is None or hi_x <= hi:
                hi, hi_excl = hi_x, True
        if lo is None and hi is None:
            whole = integer_range(None, None)
            assert whole is not None
            if integer:
                return whole
            return seq(whole, opt(seq(Lit("."), Rep(Cls(((0x30, 0x39),)), 1, None))),
                       opt(seq(Cls.of([(0x65, 0x65), (0x45, 0x45)]),
                               opt(Cls.of([(0x2B, 0x2B), (0x2D, 0x2D)])),
                               Rep(Cls(((0x30, 0x39),)), 1, 2))))
        if integer:
            int_lo = None if lo is None else (math.floor(lo) + 1 if lo_excl else math.ceil(lo))
            int_hi = None if hi is None else (math.ceil(hi) - 1 if hi_excl else math.floor(hi))
            expr = integer_range(int_lo, int_hi)
        else:
            expr = number_range(lo, hi, lo_excl, hi_excl)
        if expr is None:
            raise UnsupportedSchemaError(f"{path}: no {'integer' if integer else 'number'} "
                                         f"satisfies the bounds")
        return expr

    # -- containers -----------------------------------------------------------------

    def _shared(self, expr: Expr, path: str) -> Expr:
        """Large repeated items become one named rule instead of inlined copies."""
        return Ref(self._rule(path, expr)) if _size(expr) > self.SHARE_ABOVE else expr

    def object(self, schema: Mapping[str, Any], path: str) -> Expr:
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        additional = schema.get("additionalProperties", not self.strict)
        missing = [name for name in required if name not in props]
        if missing:
            raise UnsupportedSchemaError(f"{path}: required properties {missing} have no "
                                         "schema in properties")
        names = list(props)
        members = [seq(Lit(_dump(name)), Lit(":"), self.ws_sep,
                       self.value(props[name], f"{path}/properties/{name}")) for name in names]
        is_required = [name in required for name in names]
        extra = None
        if additional is not False:
            extra_value = self.value({} if additional is True else additional,
                                     f"{path}/additionalProperties")
            extra = self._shared(seq(self.key_other_than(set(names)),
                                     Lit(":"), self.ws_sep, extra_value),
                                 f"{path}/additionalProperties")
        comma = seq(Lit(","), self.ws_sep)
        tail = Rep(seq(comma, extra), 0, None) if extra is not None else EMPTY
        body = self._members(members, is_required, tail, extra, comma, path)
        return seq(Lit("{"), self.ws_edge, body, self.ws_edge, Lit("}"))

    def _members(self, members: list[Expr], is_required: list[bool], tail: Expr,
                 extra: Expr | None, comma: Expr, path: str) -> Expr:
        """Members in order, optional ones omittable, commas only between present ones.

        rest(i) — "something was already written": a comma and member j >= i (all of i..j-1
        optional) then rest(j+1), or the end when every member from i is optional. These are
        named rules so the choice structure is shared, not copied per combination.
        """
        n = len(members)
        if all(is_required):
            parts: list[Expr] = []
            for i, member in enumerate(members):
                parts += [comma, member] if i else [member]
            if extra is not None:
                if n:
                    return seq(*parts, tail)
                return opt(seq(extra, tail))
            return seq(*parts)
        rest_names = [self._rule(f"{path}/rest{i}") for i in range(n + 1)]

        def choices(i: int, lead: Expr) -> list[Expr]:
            options = []
            for j in range(i, n):
                options.append(seq(lead, members[j], Ref(rest_names[j + 1])))
                if is_required[j]:
                    return options
            return options

        for i in range(n + 1):
            ending = [] if any(is_required[i:]) else [tail]
            self.grammar.add(rest_names[i], alt(*choices(i, comma), *ending))
        first = choices(0, EMPTY)
        if all(not r for r in is_required):
            first.append(opt(seq(extra, tail)) if extra is not None else EMPTY)
        return alt(*first)

    def key_other_than(self, names: set[str]) -> Expr:
        """A JSON string of plain characters (no escapes) that is none of `names`."""
        plain = STRING_CHAR_SAFE
        any_text = Rep(plain, 0, None)
        encoded = {_dump(name)[1:-1] for name in names}

        def differ(prefix: str) -> Expr:
            nexts = sorted({w[len(prefix)] for w in encoded
                            if w.startswith(prefix) and len(w) > len(prefix)})
            options: list[Expr] = []
            if prefix not in encoded:
                options.append(EMPTY)
            others = subtract_ranges(plain.ranges, [(ord(c), ord(c)) for c in nexts])
            if others:
                options.append(seq(Cls(others), any_text))
            options += [seq(Lit(c), differ(prefix + c)) for c in nexts]
            return alt(*options)

        return seq(Lit('"'), differ("") if encoded else any_text, Lit('"'))

    def array(self, schema: Mapping[str, Any], path: str) -> Expr:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", False if prefix else True)
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        if not isinstance(lo, int) or lo < 0 or (hi is not None and (not isinstance(hi, int)
                                                                     or hi < lo)):
            raise UnsupportedSchemaError(f"{path}: bad minItems/maxItems")
        comma = seq(Lit(","), self.ws_sep)
        fixed = [self.value(s, f"{path}/prefixItems/{i}") for i, s in enumerate(prefix)]
        if len(fixed) < lo and items is False:
            raise UnsupportedSchemaError(f"{path}: minItems exceeds prefixItems")
        if hi is not None and len(fixed) > hi:
            fixed = fixed[:hi]
        more: Expr | None = None
        if items is not False and (hi is None or hi > len(fixed)):
            more = self._shared(self.value(items, f"{path}/items"), f"{path}/items")
        # Prefix items must all appear once the array has that many; keep it simple and
        # require the whole prefix.
        parts: list[Expr] = []
        for i, item in enumerate(fixed):
            parts += [comma, item] if i else [item]
        rest_lo = max(0, lo - len(fixed))
        rest_hi = None if hi is None else hi - len(fixed)
        if more is None:
            body = seq(*parts)
        elif fixed:
            body = seq(*parts, Rep(seq(comma, more), rest_lo, rest_hi))
        elif rest_lo >= 1:
            body = seq(more, Rep(seq(comma, more), rest_lo - 1,
                                 None if rest_hi is None else rest_hi - 1))
        else:
            body = opt(seq(more, Rep(seq(comma, more), 0,
                                     None if rest_hi is None else rest_hi - 1)))
        return seq(Lit("["), self.ws_edge, body, self.ws_edge, Lit("]"))

    # -- any JSON -------------------------------------------------------------------

    def any_value(self) -> str:
        """Rules for any JSON value (recursive), added once."""
        if "json-value" in self.grammar.rules:
            return "json-value"
        string = seq(Lit('"'), Rep(STRING_CHAR, 0, None), Lit('"'))
        number = self.number({}, False, "#")
        value, comma = Ref("json-value"), seq(Lit(","), self.ws_sep)
        member = seq(Ref("json-string"), Lit(":"), self.ws_sep, value)
        self.grammar.add("json-string", string)
        self.grammar.add("json-value", alt(
            seq(Lit("{"), self.ws_edge, opt(seq(member, Rep(seq(comma, member), 0, None))),
                self.ws_edge, Lit("}")),
            seq(Lit("["), self.ws_edge, opt(seq(value, Rep(seq(comma, value), 0, None))),
                self.ws_edge, Lit("]")),
            Ref("json-string"), number, Lit("true"), Lit("false"), Lit("null")))
        return "json-value"


def json_schema_grammar(schema: Any, max_whitespace: int | None = None,
                        strict: bool = True) -> Grammar:
    """The grammar of JSON documents valid under `schema` (a parsed JSON Schema)."""
    return SchemaConverter(schema, max_whitespace, strict=strict).convert()


def json_object_grammar(max_whitespace: int | None = None) -> Grammar:
    """Any JSON object (OpenAI ``response_format: json_object``)."""
    converter = SchemaConverter({"type": "object"}, max_whitespace)
    converter.grammar.add("root", seq(Lit("{"), converter.ws_edge, Ref("json-object-body"),
                                      converter.ws_edge, Lit("}")))
    value, comma = Ref(converter.any_value()), seq(Lit(","), converter.ws_sep)
    member = seq(Ref("json-string"), Lit(":"), converter.ws_sep, value)
    converter.grammar.add("json-object-body", opt(seq(member, Rep(seq(comma, member), 0, None))))
    return converter.grammar
