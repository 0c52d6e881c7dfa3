"""docs/ARCHITECTURE.md stays true: every code name its glossary cites exists in the tree.

A backquoted span in the glossary is a class, function, field or constant defined under py/
(`Name`, `Class.member`, `function(args)`), or a file pattern under py/atlas (`app*.py`).
Renaming something the glossary names fails here, so the page is updated with the code.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "ARCHITECTURE.md"
_SPAN = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"^(?P<owner>[A-Za-z_]\w*)(\.(?P<member>[A-Za-z_]\w*))?(\([\w, ]*\))?$")


def glossary_spans(text: str) -> list[str]:
    section = text.split("\n## Glossary", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][2:]  # no header
    return sorted({span for row in rows for span in _SPAN.findall(row)})


@cache
def _sources() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in (REPO / "py").rglob("*.py")}


def _defines(text: str, name: str) -> bool:
    pattern = rf"^\s*(class|def|async def)\s+{name}\b|^\s*{name}\s*[:=]"
    return re.search(pattern, text, re.MULTILINE) is not None


def exists(span: str) -> bool:
    if span.endswith(".py"):
        return any((REPO / "py" / "atlas").rglob(span))
    match = _NAME.match(span)
    if match is None:
        return False
    owner, member = match["owner"], match["member"]
    files = [text for text in _sources().values() if _defines(text, owner)]
    return bool(files) and (member is None or any(_defines(t, member) for t in files))


def test_every_glossary_name_exists_in_the_code() -> None:
    spans = glossary_spans(DOC.read_text(encoding="utf-8"))
    assert len(spans) > 20, spans  # the glossary was found and parsed
    missing = [s for s in spans if not exists(s)]
    assert not missing, f"names in the ARCHITECTURE.md glossary that the code lacks: {missing}"


def test_the_checker_rejects_what_does_not_exist() -> None:
    assert exists("EngineCore") and exists("EngineCore.step") and exists("app*.py")
    assert exists("LLMEngine.generate(requests)")
    assert not exists("EngineCore.no_such_member") and not exists("NoSuchClass")
    assert not exists("zz*.py") and not exists("two words")
