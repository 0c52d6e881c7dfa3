"""The git facts the gate needs: the commit, and which paths changed. Thin I/O over `git`.

Renames are listed as a deletion plus an addition (`--no-renames`), so moving a file out of
a perf path still names the perf path. Untracked files count as changes (ignored ones do
not): a new kernel that is not yet added is still in the tree being judged.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


class GitError(RuntimeError):
    """git is missing, or refused the command (its stderr is in the message)."""


def _git(repo_root: Path, *args: str) -> str:
    try:
        result = subprocess.run(["git", *args], cwd=repo_root, capture_output=True, text=True,
                                check=False)
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    if result.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def _paths(output: str) -> list[str]:
    return [p for p in output.split("\0") if p]


def repo_root(start: Path) -> Path:
    return Path(_git(start, "rev-parse", "--show-toplevel").strip())


def head_commit(repo_root: Path) -> str:
    return _git(repo_root, "rev-parse", "HEAD").strip()


def resolve_commit(repo_root: Path, rev: str) -> str:
    """The full id of `rev`; GitError when this clone does not have it."""
    return _git(repo_root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()


def untracked(repo_root: Path) -> list[str]:
    return _paths(_git(repo_root, "ls-files", "-z", "--others", "--exclude-standard"))


def uncommitted(repo_root: Path) -> list[str]:
    """Staged, unstaged and untracked changes against HEAD."""
    tracked = _paths(_git(repo_root, "diff", "--name-only", "--no-renames", "-z", "HEAD"))
    return sorted({*tracked, *untracked(repo_root)})


def changed_since(repo_root: Path, commit: str) -> list[str]:
    """Every path whose content in the working tree differs from `commit`."""
    tracked = _paths(_git(repo_root, "diff", "--name-only", "--no-renames", "-z", commit))
    return sorted({*tracked, *untracked(repo_root)})


def changed_on_branch(repo_root: Path, base: str) -> list[str]:
    """What this branch changes: `base...HEAD` (since the merge base) plus uncommitted work."""
    branch = _paths(_git(repo_root, "diff", "--name-only", "--no-renames", "-z",
                         f"{base}...HEAD"))
    return sorted({*branch, *uncommitted(repo_root)})
