#!/usr/bin/env bash
# Installs Atlas and its Python dependencies into the current Python environment.
# Idempotent; used by tools/serve.sh and tools/test.sh so that a fresh machine needs
# nothing but python3 with pip.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  -e ".${extras:+[$extras]}"
