"""Where a run came from: the Atlas version and the git commit of the checkout the command
runs in (when it runs in one), so a stored number can be traced to the code that made it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import atlas


def git_state(cwd: Path) -> tuple[str | None, bool | None]:
    """(HEAD commit, whether tracked files differ from it); (None, None) outside a git
    checkout or without git."""
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
