"""pyproject.toml's `requires-python` says what the code needs: its floor is the newest
Python that a module's imports or syntax require, no lower (an install on an older Python
would fail at import) and no higher (it would refuse Pythons that work)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).absolute().parents[2]

#: standard-library modules newer than 3.10, with the release that added them
NEW_STDLIB = {"tomllib": (3, 11), "wsgiref.types": (3, 12)}
OLDEST_SUPPORTED = (3, 10)  # the oldest Python the project ever claimed


def _declared_floor() -> tuple[int, int]:
    spec = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec.strip())
    assert m, f"requires-python {spec!r} is not a plain '>=X.Y' floor"
    return int(m.group(1)), int(m.group(2))


def _sources() -> list[Path]:
    return sorted((REPO / "py").rglob("*.py"))


def _needed_by_imports() -> dict[tuple[int, int], list[str]]:
    """Release -> the files whose imports need it (every file parsed with the declared
    floor's grammar)."""
    needed: dict[tuple[int, int], list[str]] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path),
                                       feature_version=_declared_floor())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name in NEW_STDLIB:
                    needed.setdefault(NEW_STDLIB[name], []).append(
                        str(path.relative_to(REPO)))
    return needed


def test_requires_python_is_the_floor_the_imports_need() -> None:
    """Also parses every module with the declared release's grammar (a SyntaxError names a
    construct newer than the floor)."""
    needed = _needed_by_imports()
    floor = max([OLDEST_SUPPORTED, *needed])
    assert _declared_floor() == floor, (
        f"the code needs Python {floor[0]}.{floor[1]} "
        f"({'; '.join(f'{v}: {files[:3]}' for v, files in needed.items())}) "
        f"but pyproject.toml declares {_declared_floor()}")
    assert floor >= (3, 11) and "py/atlas/kernels/tree.py" in needed[(3, 11)]  # tomllib
