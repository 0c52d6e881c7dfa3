"""JSON schema -> grammar: every output of a random walk over the real SmolLM2 vocabulary
(and, for a subset, the real Qwen3 vocabulary) is JSON that `jsonschema` accepts, for the
42 API-shaped schemas in tests/fixtures/json_schemas; plus exact accept/reject cases."""

from __future__ import annotations

import json

import jsonschema
import pytest

from atlas.grammar import GrammarCompiler, GrammarError, UnsupportedSchemaError
from tests.unit.grammar_support import (accepts, load_schema, qwen3_compiler, random_walk,
                                        schema_names, smollm2_compiler)

FORMATS = jsonschema.FormatChecker()
QWEN3_SUBSET = ["invoice", "ui_component_recursive", "unicode_enum_and_const",
                "additional_properties_typed", "expression_tree", "any_json_value"]


def _check_walks(compiler: GrammarCompiler, name: str, seeds: range) -> None:
    schema = load_schema(name)
    grammar = compiler.compile_json_schema(schema)
    for seed in seeds:
        text = random_walk(grammar, seed).decode("utf-8")
        value = json.loads(text)
        jsonschema.validate(value, schema, format_checker=FORMATS)


def test_there_are_at_least_40_fixture_schemas() -> None:
    assert len(schema_names()) >= 40


@pytest.mark.parametrize("name", schema_names())
def test_random_walks_give_valid_json_smollm2(name: str) -> None:
    _check_walks(smollm2_compiler(), name, range(3))


@pytest.mark.parametrize("name", QWEN3_SUBSET)
def test_random_walks_give_valid_json_qwen3(name: str) -> None:
    _check_walks(qwen3_compiler(), name, range(2))


def test_json_object_mode_gives_objects() -> None:
    grammar = smollm2_compiler().compile_json_object()
    for seed in range(4):
        assert isinstance(json.loads(random_walk(grammar, seed)), dict)
    assert not accepts(grammar, "[1]") and not accepts(grammar, '"x"')


def _grammar(schema: object):
    return smollm2_compiler().compile_json_schema(schema)


WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "unit": {"enum": ["c", "f"]},
                                            "days": {"type": "integer"}},
           "required": ["city"]}


@pytest.mark.parametrize("text,ok", [
    ('{"city":"Paris"}', True),
    ('{"city": "Paris", "unit": "c", "days": 3}', True),
    ('{"city":"Paris","days":-3}', True),
    ('{"unit":"c"}', False),                      # required property missing
    ('{"city":"Paris","unit":"k"}', False),       # not in the enum
    ('{"days":3,"city":"Paris"}', False),          # schema order
    ('{"city":"Paris","wind":1}', False),          # additionalProperties absent = false
    ('{"city":"Paris","days":3.5}', False),        # integer
    ('{"city":"Paris","days":03}', False),         # no leading zeros
    ('{"city":  "Paris"}', False),                 # bounded whitespace: one space at most
    ('{ "city":"Paris"}', False),
    ('{"city":"a\\"b\\u00e9\\n"}', True),           # escapes
    ('{"city":"a\\ud800"}', False),                # no surrogate escapes
    ('{"city":"a\nb"}', False),                    # raw control character
    ('{"city":"Zürich 東京"}', True),
])
def test_object_cases(text: str, ok: bool) -> None:
    assert accepts(_grammar(WEATHER), text) is ok


def test_max_whitespace_option_bounds_whitespace() -> None:
    compiler = GrammarCompiler(smollm2_compiler().vocab, max_whitespace=4)
    grammar = compiler.compile_json_schema(WEATHER)
    assert accepts(grammar, '{\n  "city": "Paris"\n}')
    assert not accepts(grammar, '{\n     "city": "Paris"\n}')


@pytest.mark.parametrize("schema,good,bad", [
    ({"type": "integer", "minimum": -5, "maximum": 12}, ["-5", "0", "12", "7"],
     ["-6", "13", "100", "-0", "1.0"]),
    ({"type": "integer", "exclusiveMinimum": 0}, ["1", "99999999999"], ["0", "-1"]),
    ({"type": "number", "minimum": 0, "maximum": 1}, ["0", "1", "0.25", "0.999"],
     ["1.5", "-0.1", "2", "1e3"]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"', '"é€"'],
     ['"a"', '"abcd"']),
    ({"type": "string", "pattern": "^[A-Z]{2}-\\d+$"}, ['"AB-1"', '"XY-123"'],
     ['"ab-1"', '"AB-"', '"AB-1x"']),
    ({"type": "string", "format": "date"}, ['"2024-02-28"'], ['"2024-13-01"', '"24-01-01"']),
    ({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2},
     ["[true]", "[true, false]", "[true,false]"], ["[]", "[true,true,true]", "[1]"]),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
      "items": False}, ['[1,"a"]'], ["[1]", '[1,"a",2]']),
    ({"enum": ["a", 1, None, {"k": [1]}]}, ['"a"', "1", "null", '{"k":[1]}'], ['"b"', "2"]),
    ({"const": "x\"y"}, ['"x\\"y"'], ['"xy"']),
    ({"type": ["string", "null"]}, ['"s"', "null"], ["1"]),
    ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, ["3", "false"], ['"3"']),
    ({"type": "object", "additionalProperties": {"type": "integer"},
      "properties": {"id": {"type": "string"}}, "required": ["id"]},
     ['{"id":"a"}', '{"id":"a","n":1}', '{"id":"a","n":1,"idx":2}'],
     ['{"id":"a","id":2}', '{"id":"a","n":"x"}']),
    ({"$defs": {"node": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["kids"]}}, "$ref": "#/$defs/node"},
     ['{"kids":[]}', '{"kids":[{"kids":[{"kids":[]}]}]}'], ['{"kids":[{}]}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                       "c": {"type": "integer"}}, "required": ["b"]},
     ['{"b":1}', '{"a":1,"b":2}', '{"b":2,"c":3}', '{"a":1,"b":2,"c":3}'],
     ['{}', '{"a":1}', '{"a":1,"c":3}', '{,"b":1}', '{"b":1,}']),
])
def test_keyword_cases(schema: object, good: list[str], bad: list[str]) -> None:
    grammar = _grammar(schema)
    for text in good:
        assert accepts(grammar, text), text
        jsonschema.validate(json.loads(text), schema, format_checker=FORMATS)
    for text in bad:
        assert not accepts(grammar, text), text


@pytest.mark.parametrize("schema,message", [
    ({"type": "array", "uniqueItems": True}, "uniqueItems"),
    ({"not": {"type": "string"}}, "not"),
    ({"type": "integer", "multipleOf": 3}, "multipleOf"),
    ({"$ref": "#/$defs/missing"}, "does not resolve"),
    ({"$ref": "https://example.com/s.json"}, "local references"),
    ({"type": "object", "properties": {}, "required": ["x"]}, "required properties"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "satisfies the bounds"),
    ({"type": "blob"}, "unknown type"),
    (False, "accepts no value"),
])
def test_unsupported_schemas_are_clear_errors(schema: object, message: str) -> None:
    with pytest.raises(UnsupportedSchemaError, match=message):
        _grammar(schema)


def test_schema_text_that_is_not_json_is_an_error() -> None:
    with pytest.raises(GrammarError, match="not valid JSON"):
        smollm2_compiler().compile_json_schema("{nope")


def test_compiled_grammars_are_cached_by_schema_and_vocabulary() -> None:
    compiler = smollm2_compiler()
    first = compiler.compile_json_schema(WEATHER)
    hits = compiler.hits
    assert compiler.compile_json_schema(json.dumps(WEATHER)) is first
    assert compiler.hits == hits + 1
    assert compiler.compile_json_schema({**WEATHER, "required": []}) is not first
    other = GrammarCompiler(qwen3_compiler().vocab)
    assert other.compile_json_schema(WEATHER) is not first


def test_non_strict_schemas_allow_extra_properties() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    lenient = smollm2_compiler().compile_json_schema(schema, strict=False)
    assert accepts(lenient, '{"id":1,"note":"x","tags":[1,{"a":null}]}')
    assert not accepts(lenient, '{"id":1,"id":2}')
    assert not accepts(_grammar(schema), '{"id":1,"note":"x"}')
    assert smollm2_compiler().compile_json_schema(schema) is not lenient
    for seed in range(3):
        value = json.loads(random_walk(lenient, seed))
        jsonschema.validate(value, schema)
