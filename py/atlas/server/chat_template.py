"""Rendering a model's jinja chat template, sandboxed.

HF chat templates are jinja programs shipped inside the checkpoint, so they run in jinja2's
immutable sandbox with the globals and filters the templates in the wild rely on
(`raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII and `<>` literal).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Mapping, Sequence

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateError(ValueError):
    """The template rejected the conversation (raise_exception) or failed to render."""


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False,
            separators: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii,
                      separators=tuple(separators) if separators else None, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"chat template does not compile: {exc}") from exc
        self._special = {"bos_token": bos_token, "eos_token": eos_token}

    def render(self, messages: Sequence[Mapping[str, Any]], *,
               tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = True, enable_thinking: bool = True,
               extra: Mapping[str, Any] | None = None) -> str:
        variables = {**self._special, **(extra or {}), "messages": list(messages),
                     "tools": list(tools) if tools else None,
                     "add_generation_prompt": add_generation_prompt,
                     "enable_thinking": enable_thinking}
        try:
            return self._template.render(**variables)
        except TemplateError:
            raise
        except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise TemplateError(f"chat template failed: {exc}") from exc


def pick_template(chat_template: Any, want_tools: bool) -> str | None:
    """tokenizer_config's `chat_template`: a string, or a list of named templates where
    "tool_use" serves requests with tools and "default" the rest."""
    if chat_template is None or isinstance(chat_template, str):
        return chat_template
    named = {t.get("name"): t.get("template") for t in chat_template if isinstance(t, dict)}
    if want_tools and "tool_use" in named:
        return named["tool_use"]
    return named.get("default") or next(iter(named.values()), None)
