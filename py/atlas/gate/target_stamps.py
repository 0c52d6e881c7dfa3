"""Where a record's targets and closure hashes come from: the PTX sets that were measured.

Either the running server reports the sets it loaded (`GET /v1/atlas/targets`), or, for a
gate measured with no server (the kernel table), the PTX-set artifacts themselves are read.
Both carry the closure hash baked at build time. Neither recomputes it from the tree: the
tree and the binary differ exactly when it matters (a stale build, a dirty tree, a set
carried between machines), and a tree-side hash would paper over all three.

Server contract: `GET {url}/v1/atlas/targets` answers 200 with
`{"targets": [{"target": "hopper/qwen3-8b/bf16", "arch": "sm_90a",
"compiler_version": "...", "flags": [...], "closure_hash": "..."}, ...]}`, one entry per PTX
set the server uploaded, its fields copied from the artifact's header.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from atlas.kernels.ptxset import PTXSET_SUFFIX

from .records import TargetStamp

TARGETS_PATH = "/v1/atlas/targets"


class TargetsUnavailable(RuntimeError):
    """The measured PTX sets cannot be identified; the message says where it looked."""


def parse_targets(doc: Any, origin: str) -> tuple[TargetStamp, ...]:
    """The stamps in a targets response; malformed or empty is an error naming `origin`."""
    entries = doc.get("targets") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise TargetsUnavailable(f"{origin}: expected {{\"targets\": [...]}} with at least "
                                 f"one PTX set, got {json.dumps(doc)[:200]}")
    try:
        return tuple(TargetStamp.from_json(e) for e in entries)
    except (KeyError, TypeError, ValueError) as exc:
        raise TargetsUnavailable(f"{origin}: malformed target entry: {exc}") from None


def fetch_server_targets(url: str, timeout_s: float = 10.0) -> tuple[TargetStamp, ...]:
    endpoint = url.rstrip("/") + TARGETS_PATH
    try:
        with urllib.request.urlopen(endpoint, timeout=timeout_s) as response:
            doc = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise TargetsUnavailable(f"{endpoint}: HTTP {exc.code}; the server must report the "
                                 f"PTX sets it loaded there") from None
    except (urllib.error.URLError, OSError) as exc:
        raise TargetsUnavailable(f"{endpoint}: no answer ({exc}); is the server running?") \
            from None
    except json.JSONDecodeError as exc:
        raise TargetsUnavailable(f"{endpoint}: not JSON ({exc})") from None
    return parse_targets(doc, endpoint)


def read_artifact_targets(path: Path) -> tuple[TargetStamp, ...]:
    """Stamps from PTX-set artifacts: one `*.ptxset.json` file, or every one in a directory."""
    if not path.exists():
        raise TargetsUnavailable(f"{path} does not exist")
    files = sorted(path.glob(f"*{PTXSET_SUFFIX}")) if path.is_dir() else [path]
    if not files:
        raise TargetsUnavailable(f"{path}: no *{PTXSET_SUFFIX} artifacts")
    stamps = []
    for file in files:
        try:
            doc = json.loads(file.read_bytes())
            stamps.append(TargetStamp.from_json(doc))
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise TargetsUnavailable(f"{file}: not a PTX-set artifact: {exc}") from None
    return tuple(stamps)
