"""Style checks that need nothing beyond the standard library, so CI runs them anywhere.

Per Python file under py/, tests/, tools/ and ci/: lines at most 100 columns, no tab
indentation, no trailing whitespace, a final newline, no `import *`, no bare `except:`, no
TODO/FIXME/XXX comments (the house rule: nothing is left as "done later"), and no
module-level import that is never used (an `__init__.py` may re-export). A `# noqa` comment
on a line waives that line's findings (e.g. an import kept for its registration side effect),
except a leftover marker.

Usage: python3 ci/lint.py [PATH ...]   (default: the directories above). Exit 1 on findings,
each printed as `path:line: message`.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIRS = ("py", "tests", "tools", "ci")
SKIP_PARTS = {"__pycache__", ".git", "build", "node_modules"}
MAX_COLUMNS = 100
_MARKER = re.compile(r"\b(TODO|FIXME|XXX)\b")
_NOQA = re.compile(r"#\s*noqa\b", re.IGNORECASE)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def python_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        candidates = [path] if path.is_file() else sorted(path.rglob("*.py"))
        files += [p for p in candidates if not SKIP_PARTS & set(p.parts)]
    return files


def string_interior_lines(text: str) -> set[int]:
    """Lines inside a multi-line string literal: their whitespace is data (e.g. PTX text
    indented with tabs), not layout."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.STRING and token.end[0] > token.start[0]:
            lines.update(range(token.start[0] + 1, token.end[0] + 1))
    return lines


def line_findings(text: str) -> list[tuple[int, str]]:
    found = []
    data_lines = string_interior_lines(text)
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > MAX_COLUMNS:
            found.append((number, f"line is {len(line)} columns (max {MAX_COLUMNS})"))
        if number in data_lines:
            continue
        if line != line.rstrip():
            found.append((number, "trailing whitespace"))
        if "\t" in line[:len(line) - len(line.lstrip())]:
            found.append((number, "tab in indentation"))
    if text and not text.endswith("\n"):
        found.append((text.count("\n") + 1, "no newline at end of file"))
    return found


def comment_findings(text: str) -> tuple[list[tuple[int, str]], set[int]]:
    """Leftover markers, and the lines that carry a `# noqa` waiver."""
    found, waived = [], set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT:
            continue
        if _MARKER.search(token.string):
            found.append((token.start[0], f"leftover marker: {token.string.strip()}"))
        if _NOQA.search(token.string):
            waived.add(token.start[0])
    return found, waived


def _used_names(tree: ast.Module) -> set[str]:
    """Every identifier the module refers to, including inside string annotations and
    `__all__` (a name mentioned in a string constant counts as used)."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value  # type: ignore[assignment]
            if isinstance(root, ast.Name):
                used.add(root.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.update(_IDENTIFIER.findall(node.value))
    return used


def ast_findings(tree: ast.Module, is_package_init: bool) -> list[tuple[int, str]]:
    found = []
    imported: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported[alias.asname or alias.name.split(".")[0]] = node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if alias.name == "*":
                    found.append((node.lineno, "`import *` hides where names come from"))
                else:
                    imported[alias.asname or alias.name] = node.lineno
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is None:
            found.append((node.lineno, "bare `except:` (name the exceptions you expect)"))
    if not is_package_init:
        used = _used_names(tree)
        found += [(line, f"unused import {name}") for name, line in imported.items()
                  if name not in used]
    return found


def lint_file(path: Path) -> list[str]:
    text = path.read_text()
    try:
        rel = path.relative_to(ROOT)
    except ValueError:
        rel = path
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        return [f"{rel}:{exc.lineno}: syntax error: {exc.msg}"]
    markers, waived = comment_findings(text)
    findings = markers + [f for f in (line_findings(text)
                                      + ast_findings(tree, path.name == "__init__.py"))
                          if f[0] not in waived]
    return [f"{rel}:{line}: {message}" for line, message in sorted(findings)]


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [ROOT / d for d in DEFAULT_DIRS if (ROOT / d).exists()]
    files = python_files(paths)
    findings = [f for path in files for f in lint_file(path)]
    for finding in findings:
        print(finding)
    print(f"lint: {len(files)} files, {len(findings)} findings", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
