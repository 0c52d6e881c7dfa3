"""The house layering rules, enforced by reading the source with `ast` (nothing is imported).

1. SBIO: business logic does no I/O. Modules under ``py/atlas/model``, ``py/atlas/engine``,
   ``py/atlas/grammar`` and ``py/atlas/server`` (except the aiohttp handler modules
   ``server/app*.py``) must not import ``cuda``, ``ctypes``, ``socket`` or ``sqlite3``, nor
   open files (builtin ``open``, ``io.open``, ``os.open`` or pathlib's
   ``read_text``/``read_bytes``/``write_text``/``write_bytes``). GPU work goes through
   GpuBackend, bytes through WeightStore.
2. Dependencies point one way: ``core <- kernels <- runtime <- comm <- model <- engine <-
   server <- atlas_cli``. A package may import its own layer and lower ones. ``bench`` and
   ``gate`` sit beside the stack: they import only ``core`` and ``kernels``, and only
   ``atlas_cli`` imports them. ``grammar`` imports only ``core``; ``model`` and the layers
   above use it.
3. ``aiohttp`` belongs to the HTTP edges: ``server``, ``bench`` (its HTTP client) and
   ``atlas_cli``.

Every violation is reported as ``path:line: message`` so the failure says what to fix.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PY_ROOT = Path(__file__).resolve().parents[2] / "py"

STACK = ("core", "kernels", "runtime", "comm", "model", "engine", "server", "atlas_cli")
SIDE_PACKAGES = ("bench", "gate")
SIDE_MAY_IMPORT = frozenset({"core", "kernels"})
GRAMMAR = "grammar"
GRAMMAR_MAY_IMPORT = frozenset({"core"})
GRAMMAR_USERS_FROM = "model"

SBIO_PACKAGES = ("model", "engine", "server", GRAMMAR)
SBIO_FORBIDDEN_MODULES = frozenset({"cuda", "ctypes", "socket", "sqlite3"})
FILE_OPENING_FUNCTIONS = frozenset({"io.open", "os.open"})
FILE_IO_METHODS = frozenset({"read_text", "read_bytes", "write_text", "write_bytes"})

AIOHTTP_ALLOWED = frozenset({"server", "bench", "atlas_cli"})


@dataclass(frozen=True, slots=True)
class Violation:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        try:
            shown = self.path.relative_to(PY_ROOT.parent)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}: {self.message}"


# --------------------------------------------------------------------------------------
# Reading imports
# --------------------------------------------------------------------------------------


def module_name(path: Path, root: Path) -> str:
    """Dotted module name of a source file under `root` (``__init__`` names its package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of everything a module imports, relative ones resolved.

    ``from pkg import name`` yields ``pkg.name`` as well as ``pkg``, because `name` may be
    a submodule (``from .. import runtime``); the layer of ``atlas.runtime`` is what counts.
    """
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names
                      if alias.name != "*"]
    return found


def layer_of(dotted: str) -> str | None:
    """The Atlas package a dotted name belongs to, or None for third-party/stdlib names."""
    parts = dotted.split(".")
    if parts[0] == "atlas_cli":
        return "atlas_cli"
    if parts[0] == "atlas" and len(parts) > 1 and parts[1] in STACK + SIDE_PACKAGES + (GRAMMAR,):
        return parts[1]
    return None


def may_import(importer: str, imported: str) -> bool:
    if importer == imported or importer == "atlas_cli":
        return True
    if importer == GRAMMAR:
        return imported in GRAMMAR_MAY_IMPORT
    if imported == GRAMMAR:
        return importer in STACK and STACK.index(importer) >= STACK.index(GRAMMAR_USERS_FROM)
    if importer in SIDE_PACKAGES:
        return imported in SIDE_MAY_IMPORT
    if imported in SIDE_PACKAGES:
        return False
    return STACK.index(imported) <= STACK.index(importer)


# --------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------


def _parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


def sbio_violations(path: Path) -> list[Violation]:
    """Hardware/network imports and file opening in one business-logic module."""
    tree = _parse(path)
    out: list[Violation] = []
    flagged = {(line, name.split(".")[0]) for line, name in
               imported_modules(tree, "_", is_package=False)}
    for line, root in flagged:
        if root in SBIO_FORBIDDEN_MODULES:
            out.append(Violation(path, line, f"imports {root!r}: business logic does no I/O "
                                             "(go through GpuBackend / WeightStore)"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node.func)
        if name == "open" or name in FILE_OPENING_FUNCTIONS:
            out.append(Violation(path, node.lineno, f"calls {name}(): business logic opens "
                                                    "no files"))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in FILE_IO_METHODS:
            out.append(Violation(path, node.lineno, f"calls .{node.func.attr}(): business "
                                                    "logic opens no files"))
    return sorted(out, key=lambda v: v.line)


def dependency_violations(path: Path, root: Path) -> list[Violation]:
    """Imports of a higher layer (or a side package) and misplaced aiohttp in one module."""
    module = module_name(path, root)
    importer = layer_of(module)
    if importer is None:
        return []
    out: list[Violation] = []
    seen: set[tuple[int, str]] = set()
    for line, name in imported_modules(_parse(path), module, path.name == "__init__.py"):
        imported = layer_of(name)
        if imported is not None and not may_import(importer, imported):
            if (line, imported) not in seen:
                seen.add((line, imported))
                out.append(Violation(path, line, f"{importer} imports {name!r} ({imported}): "
                                                 "dependencies point core <- kernels <- "
                                                 "runtime <- comm <- model <- engine <- "
                                                 "server <- atlas_cli; bench/gate use "
                                                 "core/kernels"))
        if name.split(".")[0] == "aiohttp" and importer not in AIOHTTP_ALLOWED:
            out.append(Violation(path, line, f"{importer} imports aiohttp: HTTP belongs to "
                                             "server, bench and atlas_cli"))
    return sorted(out, key=lambda v: v.line)


def sources(root: Path, *packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (root / pkg).rglob("*.py"))


def sbio_sources(root: Path) -> list[Path]:
    """model/**, engine/** and server/**, minus the aiohttp handler modules server/app*.py."""
    files = sources(root / "atlas", *SBIO_PACKAGES)
    handlers = root / "atlas" / "server"
    return [p for p in files if not (p.parent == handlers and p.name.startswith("app"))]


def all_sources(root: Path) -> list[Path]:
    return (sources(root / "atlas", *(STACK[:-1] + SIDE_PACKAGES + (GRAMMAR,)))
            + sources(root, "atlas_cli"))


def _report(violations: list[Violation]) -> str:
    return "\n".join(str(v) for v in violations)


# --------------------------------------------------------------------------------------
# Tests on the real tree
# --------------------------------------------------------------------------------------


def test_the_tree_has_sources_to_scan() -> None:
    """Guards against a moved tree making every other test here pass vacuously."""
    assert (PY_ROOT / "atlas" / "core" / "dtype.py") in all_sources(PY_ROOT)
    assert (PY_ROOT / "atlas" / "model" / "batch.py") in sbio_sources(PY_ROOT)
    assert (PY_ROOT / "atlas" / "engine" / "scheduler.py") in sbio_sources(PY_ROOT)
    assert (PY_ROOT / "atlas" / "grammar" / "pda.py") in sbio_sources(PY_ROOT)
    assert (PY_ROOT / "atlas" / "grammar" / "pda.py") in all_sources(PY_ROOT)


def test_business_logic_does_no_io() -> None:
    found = [v for p in sbio_sources(PY_ROOT) for v in sbio_violations(p)]
    assert not found, "SBIO violations:\n" + _report(found)


def test_dependencies_point_down_the_stack() -> None:
    found = [v for p in all_sources(PY_ROOT) for v in dependency_violations(p, PY_ROOT)]
    assert not found, "layering violations:\n" + _report(found)


# --------------------------------------------------------------------------------------
# Self-tests: the scanner catches planted violations and leaves clean code alone
# --------------------------------------------------------------------------------------


def _plant(root: Path, relative: str, source: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(root).parents:
        if parent != Path("."):
            (root / parent / "__init__.py").touch()
    path.write_text(source, encoding="utf-8")
    return path


PLANTED_SBIO = """\
import json
import ctypes
from cuda.bindings import driver
import socket as net

def load(path):
    with open(path) as f:
        return json.load(f)

def save(path, text):
    path.write_text(text)
"""


def test_sbio_scanner_catches_planted_violations(tmp_path: Path) -> None:
    path = _plant(tmp_path, "atlas/model/bad.py", PLANTED_SBIO)
    found = sbio_violations(path)
    assert [(v.line, v.message.split(":")[0]) for v in found] == [
        (2, "imports 'ctypes'"), (3, "imports 'cuda'"), (4, "imports 'socket'"),
        (7, "calls open()"), (11, "calls .write_text()")]
    assert str(found[0]).endswith("bad.py:2: " + found[0].message)


def test_sbio_exempts_only_the_aiohttp_handler_modules(tmp_path: Path) -> None:
    handler = _plant(tmp_path, "atlas/server/app_files.py", "import socket\n")
    logic = _plant(tmp_path, "atlas/server/engine_thread.py", "import socket\n")
    nested = _plant(tmp_path, "atlas/server/parsers/app_like.py", "import socket\n")
    scanned = sbio_sources(tmp_path)
    assert handler not in scanned
    assert logic in scanned and nested in scanned


def test_sbio_scanner_passes_clean_code(tmp_path: Path) -> None:
    path = _plant(tmp_path, "atlas/model/good.py",
                  "from ..runtime.gpu import GpuBackend\n"
                  "def f(blocks):\n    blocks.open('text')\n    return GpuBackend\n")
    assert sbio_violations(path) == []


@pytest.mark.parametrize("relative, source, line", [
    ("atlas/core/x.py", "from atlas.runtime import gpu\n", 1),
    ("atlas/core/x.py", "from ..kernels import tree\n", 1),
    ("atlas/runtime/sub/x.py", "import json\nfrom ... import model\n", 2),
    ("atlas/model/x.py", "from ..engine.scheduler import Scheduler\n", 1),
    ("atlas/engine/x.py", "from ..server.generation import Generation\n", 1),
    ("atlas/engine/x.py", "import aiohttp\n", 1),
    ("atlas/server/x.py", "import atlas_cli.main\n", 1),
    ("atlas/runtime/x.py", "from ..gate import records\n", 1),
    ("atlas/gate/x.py", "from ..runtime import host\n", 1),
    ("atlas/bench/x.py", "def f():\n    from atlas.model import engine\n", 2),
    ("atlas/gate/x.py", "import aiohttp\n", 1),
    ("atlas/model/x.py", "from aiohttp import web\n", 1),
    ("atlas/grammar/x.py", "from ..runtime import host\n", 1),
    ("atlas/runtime/x.py", "from atlas.grammar import GrammarMatcher\n", 1),
    ("atlas/bench/x.py", "from ..grammar import compiler\n", 1),
])
def test_dependency_scanner_catches_upward_imports(tmp_path: Path, relative: str, source: str,
                                                   line: int) -> None:
    found = dependency_violations(_plant(tmp_path, relative, source), tmp_path)
    assert found and all(v.line == line for v in found), _report(found)


@pytest.mark.parametrize("relative, source", [
    ("atlas/model/x.py", "from ..runtime.gpu import GpuBackend\nfrom ..core import dtype\n"),
    ("atlas/model/sub/x.py", "from .. import batch\nfrom ...comm import y\n"),
    ("atlas/core/__init__.py", "from .dtype import DType\n"),
    ("atlas/server/x.py", "import aiohttp\nfrom atlas.model.batch import SeqChunk\n"),
    ("atlas/engine/x.py", "from ..model.batch import SeqChunk\nfrom ..runtime import kv_cache\n"),
    ("atlas/bench/x.py", "import aiohttp\nfrom ..kernels import tree\nfrom ..core import dtype\n"),
    ("atlas/gate/x.py", "from atlas.kernels.tree import KernelTree\n"),
    ("atlas_cli/cmd_x.py", "from atlas.gate import records\nfrom atlas.server import app\n"),
    ("atlas/grammar/x.py", "from ..core.sampling import SamplingParams\nfrom . import pda\n"),
    ("atlas/server/x.py", "from atlas.grammar import GrammarMatcher\n"),
    ("atlas/model/x.py", "from ..grammar.compiler import GrammarCompiler\n"),
])
def test_dependency_scanner_passes_allowed_imports(tmp_path: Path, relative: str,
                                                   source: str) -> None:
    assert dependency_violations(_plant(tmp_path, relative, source), tmp_path) == []
