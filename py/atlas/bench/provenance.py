"""Where a run came from: the Atlas version and the git commit of the checkout the command
runs in (when it runs in one), so a stored number can be traced to the code that made it.

`ATLAS_COMMIT`, when set, names the tree instead of git: the GPU machine receives a copy of
the working tree whose `.git` (if any) is not the history that tree was committed in.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import atlas


COMMIT_ENV = "ATLAS_COMMIT"


def git_state(cwd: Path) -> tuple[str | None, bool | None]:
    """(HEAD commit, whether tracked files differ from it); (None, None) outside a git
    checkout or without git; ($ATLAS_COMMIT, None) when that is set."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV], None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                                text=True, check=False, timeout=10)
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=cwd, capture_output=True, text=True, check=False,
                                timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return commit.stdout.strip(), dirty


def provenance(cwd: Path | None = None) -> dict[str, object]:
    commit, dirty = git_state(cwd or Path.cwd())
    return {"atlas_version": atlas.__version__, "git_commit": commit, "git_dirty": dirty}


def commit_label(cwd: Path) -> str:
    """A short name for the tree in `cwd`: the commit's first 12 hex digits, "-dirty" when
    tracked files differ from it, "unknown" outside a checkout."""
    commit, dirty = git_state(cwd)
    return "unknown" if commit is None else commit[:12] + ("-dirty" if dirty else "")
