#!/usr/bin/env bash
# Installs Atlas and its Python dependencies into the current Python environment.
# Idempotent; used by tools/serve.sh and tools/test.sh so that a fresh machine needs
# nothing but python3 with pip. pip's own lines (collecting, downloading, building,
# installing) are the progress display; the "already satisfied" ones of a re-run are not.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
echo "installing Atlas${extras:+[$extras]} and its dependencies with pip ..." >&2
start=$SECONDS
set +e
python3 -m pip install --disable-pip-version-check --root-user-action=ignore \
  --progress-bar off -e ".${extras:+[$extras]}" 2>&1 \
  | grep --line-buffered -v -e '^Requirement already satisfied' -e '^Obtaining file' >&2
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "pip install failed (exit $status); its messages are above" >&2
  exit "$status"
fi
echo "installed in $((SECONDS - start)) s" >&2
