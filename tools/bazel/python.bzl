"""The one Python interpreter every Atlas py_binary runs with, declared once (WORKSPACE.bazel).

The README's set-up (`bash tools/test.sh`, or tools/install.sh) installs Atlas's
dependencies into whatever `python3` is first on PATH, with pip. This repository rule asks
that `python3` for its real executable (resolving pyenv/venv shims) the first time Bazel
loads the workspace, and declares it as the Python toolchain with an absolute path. Later
PATH changes do not move it (the rule does not re-run on PATH), so tool actions and their
cache keys stay put; `ATLAS_PYTHON=/path/to/python3` picks another interpreter explicitly.
"""

_BUILD = """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

py_runtime(
    name = "python3",
    interpreter_path = "{interpreter}",
    python_version = "PY3",
    stub_shebang = "#!{interpreter}",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":python3",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
"""

def _atlas_python_impl(rctx):
    chosen = rctx.os.environ.get("ATLAS_PYTHON", "")
    python = chosen or rctx.which("python3")
    if not python:
        fail("no python3 on PATH: install Python 3.10+ and run `bash tools/install.sh`, " +
             "or set ATLAS_PYTHON=/path/to/python3")
    result = rctx.execute([python, "-c", "import sys; print(sys.executable)"])
    if result.return_code != 0:
        fail("%s does not run: %s" % (python, result.stderr))
    interpreter = result.stdout.strip()
    rctx.file("BUILD.bazel", _BUILD.format(interpreter = interpreter))
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)

atlas_python = repository_rule(
    implementation = _atlas_python_impl,
    environ = ["ATLAS_PYTHON"],
    doc = "Declares the python3 found at first load (or $ATLAS_PYTHON) as the Python toolchain.",
)
