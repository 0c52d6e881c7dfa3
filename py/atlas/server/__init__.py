"""The OpenAI- and Anthropic-compatible server: protocol parsing, the thread that drives the
engine core (`atlas.engine`), tokenizer and chat templates, tool-call and reasoning parsers,
protection.

Only `app*.py` modules perform I/O (aiohttp handlers, reading model files); everything else
here is pure logic that tests drive directly.
"""
