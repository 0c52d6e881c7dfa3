"""Tool-call parsers: every format, streamed in chunks of every size, and the book's known
malformations."""

from __future__ import annotations

import json

import pytest

from atlas.server.tool_parsers import PARSERS, parser_class


def run(name, text, step, schemas=None, max_calls=None):
    parser = parser_class(name)(schemas, max_calls=max_calls)
    content, deltas = "", []
    for i in range(0, len(text), step):
        r = parser.feed(text[i:i + step])
        content, deltas = content + r.content, deltas + r.calls
    r = parser.flush()
    content, deltas = content + r.content, deltas + r.calls
    calls: dict[int, dict] = {}
    for d in deltas:
        call = calls.setdefault(d.index, {"name": None, "arguments": ""})
        if d.name is not None:
            assert call["name"] is None, "name streamed twice"
            call["name"] = d.name
        else:
            assert call["name"] is not None, "arguments before the name"
        call["arguments"] += d.arguments
    out = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    assert out == [(c.name, json.loads(c.arguments)) for c in parser.calls]
    return content, out


STEPS = [1, 2, 3, 7, 1000]


@pytest.mark.parametrize("step", STEPS)
def test_hermes_text_and_two_calls(step):
    text = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
            '{"location": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", '
            '"arguments": {}}\n</tool_call>')
    content, calls = run("hermes", text, step)
    assert content == "Let me check.\n"
    assert calls == [("get_weather", {"location": "Paris"}), ("get_time", {})]


@pytest.mark.parametrize("step", STEPS)
def test_hermes_literal_end_marker_inside_a_json_string(step):
    text = ('<tool_call>{"name": "write", "arguments": {"text": "a </tool_call> b"}}'
            '</tool_call>')
    assert run("hermes", text, step) == ("", [("write", {"text": "a </tool_call> b"})])


@pytest.mark.parametrize("step", STEPS)
def test_hermes_empty_call_is_dropped_and_text_kept(step):
    assert run("hermes", "<tool_call>{}</tool_call>Done.", step) == ("Done.", [])


@pytest.mark.parametrize("step", STEPS)
def test_hermes_markdown_fences_around_a_call_are_removed(step):
    text = ('Here:\n```json\n<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>\n```'
            '\nok')
    assert run("hermes", text, step) == ("Here:\nok", [("f", {"x": 1})])


@pytest.mark.parametrize("step", STEPS)
def test_text_that_only_looks_like_a_marker_passes_through(step):
    text = "a < b, <tool and ```python\nprint(1)\n``` end"
    assert run("hermes", text, step) == (text, [])


def test_hermes_unclosed_call_is_completed_at_the_end():
    assert run("hermes", '<tool_call>{"name": "f", "arguments": {"q": 2}}', 4) == (
        "", [("f", {"q": 2})])


def test_hermes_garbage_without_a_name_is_returned_as_text():
    assert run("hermes", "<tool_call>not json", 3) == ("<tool_call>not json", [])


def test_hermes_arguments_given_as_a_json_string():
    text = '<tool_call>{"name": "f", "arguments": "{\\"a\\": [1, 2]}"}</tool_call>'
    assert run("hermes", text, 5) == ("", [("f", {"a": [1, 2]})])


SCHEMAS = {"get_weather": {"type": "object", "properties": {
    "location": {"type": "string"}, "days": {"type": "integer"}, "zip": {"type": "string"}}}}


@pytest.mark.parametrize("step", STEPS)
def test_qwen3_coder_typed_parameters(step):
    text = ("Checking <tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n"
            "</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=zip>\n75001\n"
            "</parameter>\n</function>\n</tool_call>")
    assert run("qwen3_coder", text, step, SCHEMAS) == (
        "Checking ", [("get_weather", {"location": "Paris", "days": 3, "zip": "75001"})])


@pytest.mark.parametrize("step", STEPS)
def test_qwen3_coder_missing_parameter_close(step):
    text = ("<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n"
            "<parameter=days>\n2\n</function>\n</tool_call>")
    assert run("qwen3_coder", text, step, SCHEMAS) == (
        "", [("get_weather", {"location": "Paris", "days": 2})])


@pytest.mark.parametrize("step", STEPS)
def test_qwen3_coder_literal_tool_call_close_inside_a_value(step):
    text = ("<tool_call>\n<function=write>\n<parameter=body>\nx </tool_call> y\n</parameter>\n"
            "</function>\n</tool_call>")
    assert run("qwen3_coder", text, step) == ("", [("write", {"body": "x </tool_call> y"})])


def test_qwen3_coder_empty_call_and_bare_function():
    assert run("qwen3_coder", "<tool_call>\n</tool_call>hi", 2) == ("hi", [])
    text = "<function=f>\n<parameter=a>\n1\n</parameter>\n</function>"
    assert run("qwen3_coder", text, 3) == ("", [("f", {"a": 1})])


@pytest.mark.parametrize("step", STEPS)
def test_mistral_list_form(step):
    text = ('Sure [TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, '
            '{"name": "g", "arguments": {}}]')
    assert run("mistral", text, step) == ("Sure ", [("f", {"a": 1}), ("g", {})])


@pytest.mark.parametrize("step", STEPS)
def test_mistral_v11_form(step):
    text = '[TOOL_CALLS]f[ARGS]{"a": [1, 2]}[TOOL_CALLS]g[ARGS]{}'
    assert run("mistral", text, step) == ("", [("f", {"a": [1, 2]}), ("g", {})])


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_forced_prefix_opens_a_call_the_parser_completes(name):
    parser_cls = parser_class(name)
    prefix = parser_cls().forced_prefix("f")
    rest = {"hermes": '{"x": 1}}\n</tool_call>',
            "qwen3_coder": "<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>",
            "mistral": '{"x": 1}',
            "llama3_json": '{"x": 1}}',
            "minimax_m2": '<parameter name="x">1</parameter>\n</invoke>\n</minimax:tool_call>',
            "glm45": "<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
            }[name]
    assert run(name, prefix + rest, 3) == ("", [("f", {"x": 1})])


@pytest.mark.parametrize("step", STEPS)
def test_llama3_json_calls_open_the_answer(step):
    text = ('\n {"name": "get_weather", "parameters": {"location": "Paris"}}; '
            '{"name": "get_time", "arguments": {"zone": "CET"}}')
    assert run("llama3_json", text, step) == (
        "", [("get_weather", {"location": "Paris"}), ("get_time", {"zone": "CET"})])


@pytest.mark.parametrize("step", STEPS)
def test_llama3_json_python_tag_and_plain_answers(step):
    tagged = '<|python_tag|>{"name": "f", "parameters": {"q": "a;b"}}'
    assert run("llama3_json", tagged, step) == ("", [("f", {"q": "a;b"})])
    answer = 'Paris is the capital. {"name": "not a call"} stays text.'
    assert run("llama3_json", answer, step) == (answer, [])
    data = '{"city": "Paris", "population": 2100000}'   # JSON, but no call in it
    assert run("llama3_json", data, step) == (data, [])


@pytest.mark.parametrize("step", STEPS)
def test_minimax_m2_block_of_two_typed_calls(step):
    text = ('Let me look.\n<minimax:tool_call>\n<invoke name="get_weather">\n'
            '<parameter name="location">Paris, FR</parameter>\n'
            '<parameter name="days">3</parameter>\n</invoke>\n<invoke name=search>\n'
            '<parameter name="query_tag">["tech", "events"]</parameter>\n</invoke>\n'
            '</minimax:tool_call>Done.')
    assert run("minimax_m2", text, step, SCHEMAS) == (
        "Let me look.\nDone.", [("get_weather", {"location": "Paris, FR", "days": 3}),
                                ("search", {"query_tag": ["tech", "events"]})])


@pytest.mark.parametrize("step", STEPS)
def test_minimax_m2_unclosed_tags_and_a_stream_ending_in_the_block(step):
    text = ('<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1\n'
            '<parameter name="b">x</invoke>\n<invoke name="g">\n<parameter name="c">[1]')
    assert run("minimax_m2", text, step) == ("", [("f", {"a": 1, "b": "x"}), ("g", {"c": [1]})])
    assert run("minimax_m2", "<minimax:tool_call>\n</minimax:tool_call>ok", step) == ("ok", [])


GLM_SCHEMAS = {"get_weather": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "zip": {"type": "string"},
    "metric": {"type": "boolean"}, "where": {"type": "object"}, "hours": {"type": "array"},
    "note": {"type": "string"}}}}


def glm45_call(name, *pairs):
    """A call as GLM-4.5's chat template writes it."""
    args = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in pairs)
    return f"<tool_call>{name}\n{args}</tool_call>"


@pytest.mark.parametrize("step", STEPS)
def test_glm45_text_then_two_calls(step):
    text = ("Let me check.\n" + glm45_call("get_weather", ("city", "Paris"), ("days", "3"))
            + "\n" + glm45_call("get_time", ("zone", "CET")))
    assert run("glm45", text, step, GLM_SCHEMAS) == (
        "Let me check.\n", [("get_weather", {"city": "Paris", "days": 3}),
                            ("get_time", {"zone": "CET"})])


@pytest.mark.parametrize("step", STEPS)
def test_glm45_calls_without_arguments(step):
    text = "<tool_call>get_time</tool_call>" + glm45_call("get_date") + "\nDone."
    assert run("glm45", text, step) == ("Done.", [("get_time", {}), ("get_date", {})])
    compact = "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"  # GLM-4.7
    assert run("glm45", compact, step) == ("", [("f", {"a": 1})])


@pytest.mark.parametrize("step", STEPS)
def test_glm45_values_typed_by_the_schema(step):
    text = glm45_call("get_weather", ("days", "3"), ("metric", "true"), ("zip", "75001"),
                      ("where", '{"lat": 48.8, "tags": ["a"]}'), ("hours", "[9, 12]"),
                      ("city", "[not json"), ("note", "true"), ("extra", "null"))
    assert run("glm45", text, step, GLM_SCHEMAS) == ("", [("get_weather", {
        "days": 3, "metric": True, "zip": "75001", "where": {"lat": 48.8, "tags": ["a"]},
        "hours": [9, 12], "city": "[not json", "note": "true", "extra": None})])


@pytest.mark.parametrize("step", STEPS)
def test_glm45_values_keep_angle_brackets_newlines_and_a_literal_close(step):
    code = "if a < b:\n    print('<b>x</b>')\n"
    text = glm45_call("write", ("body", code), ("tail", "x </tool_call> y"))
    assert run("glm45", text, step, {"write": {"properties": {"body": {"type": "string"}}}}) == (
        "", [("write", {"body": code, "tail": "x </tool_call> y"})])


@pytest.mark.parametrize("step", STEPS)
def test_glm45_missing_value_close(step):
    text = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n"
            "<arg_key>days</arg_key>\n<arg_value>2\n</tool_call>\n" + glm45_call("g", ("a", "1")))
    assert run("glm45", text, step, GLM_SCHEMAS) == (
        "", [("get_weather", {"city": "Paris", "days": 2}), ("g", {"a": 1})])
    last = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x\n</tool_call>"
    assert run("glm45", last, step) == ("", [("f", {"a": "x"})])


@pytest.mark.parametrize("step", STEPS)
def test_glm45_stream_ending_inside_a_block(step):
    text = glm45_call("f", ("a", "1")) + "<tool_call>g\n<arg_key>b</arg_key>\n<arg_value>[1, 2"
    assert run("glm45", text, step) == ("", [("f", {"a": 1}), ("g", {"b": "[1, 2"})])
    assert run("glm45", "<tool_call>g\n<arg_key>b</arg_ke", step) == ("", [("g", {})])
    assert run("glm45", "<tool_call>\n</tool_call>ok", step) == ("ok", [])


@pytest.mark.parametrize("step", STEPS)
def test_glm45_text_that_is_no_call_is_returned_as_text(step):
    text = "See <tool_call>is a tag</tool_call> here"
    assert run("glm45", text, step) == (text, [])


def test_glm45_name_streams_before_the_arguments_complete():
    parser = parser_class("glm45")(GLM_SCHEMAS)
    text = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par"
    deltas = [d for ch in text for d in parser.feed(ch).calls]
    assert [(d.index, d.name, d.arguments) for d in deltas] == [(0, "get_weather", "")]
    rest = parser.feed("is</arg_value>\n</tool_call>")
    assert [(d.name, json.loads(d.arguments)) for d in rest.calls] == [(None, {"city": "Paris"})]


@pytest.mark.parametrize("step", STEPS)
def test_glm45_single_call_limit(step):
    text = glm45_call("a", ("x", "1")) + "\n" + glm45_call("b", ("y", "2"))
    assert run("glm45", text, step, max_calls=1) == ("", [("a", {"x": 1})])


def test_unknown_parser_name_lists_known():
    with pytest.raises(ValueError, match="hermes"):
        parser_class("xml")


@pytest.mark.parametrize("step", STEPS)
def test_single_call_limit_drops_later_calls_without_leaking_text(step):
    text = ('<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
            '<tool_call>{"name": "b", "arguments": {}}</tool_call>')
    assert run("hermes", text, step, max_calls=1) == ("", [("a", {})])
