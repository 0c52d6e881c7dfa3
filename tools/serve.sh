#!/usr/bin/env bash
# One command from a fresh clone to a running server: installs Atlas, imports the embedded
# default model on first use, and serves it (CUDA when a GPU is present, else the CPU
# reference backend). Extra arguments go to `atlas serve` (e.g. a model dir, --port 9000).
# Every step prints progress on stderr (pip's lines, the model download and conversion,
# weight loading, preflight) until `atlas serve` prints `Listening on <bind>:<port>`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install.sh
echo "starting atlas serve $* ..." >&2
exec atlas serve "$@"
