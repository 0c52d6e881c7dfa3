"""Gathering `check`'s inputs from a repository: records, changed paths, closure hashes.

The I/O side of `atlas gate check`. Which paths count as changed:

* without a base, each gate's own record: everything that differs between the record's
  commit and the working tree (what the record cannot describe);
* with `--base REV`, one set for every gate: `REV...HEAD` plus uncommitted work (what this
  branch changes; the records on the base are taken to describe the base).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from atlas.kernels.sources import closure_hash
from atlas.kernels.tree import KernelTreeError

from . import git
from .check import ClosureNow, ClosureUnavailable, GateInput
from .gates import Gate
from .records import TargetStamp, latest_record
from .store import read_records


def gather(repo_root: Path, gates: Sequence[Gate], base: str | None) -> list[GateInput]:
    """One GateInput per gate. Raises GitError when `base` is given and cannot be diffed
    (a wrong base is the caller's mistake, not a property of a gate)."""
    branch = None if base is None else tuple(git.changed_on_branch(repo_root, base))
    since: dict[str, tuple[tuple[str, ...] | None, str]] = {}
    inputs: list[GateInput] = []
    for gate in gates:
        latest = latest_record(read_records(repo_root, gate.name))
        if latest is None or branch is not None:
            inputs.append(GateInput(gate, latest, branch))
            continue
        commit = latest.record.commit
        if commit not in since:
            since[commit] = _changed_since(repo_root, commit)
        changed, error = since[commit]
        inputs.append(GateInput(gate, latest, changed, error))
    return inputs


def _changed_since(repo_root: Path, commit: str) -> tuple[tuple[str, ...] | None, str]:
    try:
        full = git.resolve_commit(repo_root, commit)
    except git.GitError:
        return None, f"commit {commit[:10]} is not in this clone (fetch more history)"
    return tuple(git.changed_since(repo_root, full)), ""


def closure_from_tree(repo_root: Path) -> ClosureNow:
    """Recompute a stamp's closure hash from the tree with the stamp's own arch, compiler and
    flags, through the one implementation the build uses (`atlas.kernels.sources`)."""

    def closure_now(stamp: TargetStamp) -> str:
        try:
            return closure_hash(repo_root, stamp.target, stamp.arch, stamp.compiler_version,
                                list(stamp.flags))
        except (KernelTreeError, OSError) as exc:
            raise ClosureUnavailable(str(exc)) from None

    return closure_now
