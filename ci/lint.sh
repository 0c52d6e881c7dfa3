#!/usr/bin/env bash
# Lint: byte-compile everything, the stdlib style checks (ci/lint.py), shell syntax, and the
# BENCH.toml threshold schema. Needs only python3 and bash; fails CI on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
step() {
  echo "== $1" >&2
  shift
  "$@" || status=1
}

step "compileall" python3 -m compileall -q py tests tools ci
step "style (ci/lint.py)" python3 ci/lint.py
for script in ci/*.sh tools/*.sh .ci/run; do
  [ -f "$script" ] && step "bash -n $script" bash -n "$script"
done
step "BENCH.toml schema" env PYTHONPATH=py python3 -m atlas_cli.main gate thresholds --quiet

exit "$status"
