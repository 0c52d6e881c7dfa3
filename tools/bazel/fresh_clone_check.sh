#!/usr/bin/env bash
# Bazel as a new user meets it (issue 17): in a fresh clone of HEAD, with a fresh Bazel
# output root and the README's set-up already done (the dependencies in `python3`),
#   * `bazel run //py/atlas_cli:serve -- --help` prints the server's usage;
#   * `bazel build //kernels:all` prints no warning (no ambiguous target pattern);
#   * the same build with a different PATH runs no action (no PTX is rebuilt).
# ATLAS_SKIP_BUILD=1 keeps it fast and nvcc-free. About a minute on 2 cores.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d /tmp/atlas-bazel-check.XXXXXX)"
bazel=(bazel "--output_user_root=$work/root")
cleanup() {
  (cd "$work/clone" 2>/dev/null && "${bazel[@]}" shutdown >/dev/null 2>&1) || true
  rm -rf "$work"
}
trap cleanup EXIT
git clone --quiet --no-local "$repo" "$work/clone"
cd "$work/clone"
export ATLAS_SKIP_BUILD=1

"${bazel[@]}" run //py/atlas_cli:serve -- --help >"$work/help.txt" 2>"$work/run.log" \
  || { tail -30 "$work/run.log"; exit 1; }
grep -q "^Usage: .* serve \[OPTIONS\] \[MODEL\]" "$work/help.txt" \
  || { echo "FAIL: no serve usage"; cat "$work/help.txt"; exit 1; }
echo "ok: bazel run //py/atlas_cli:serve -- --help"

"${bazel[@]}" build //kernels:all 2>"$work/build.log"
if grep -q "WARNING" "$work/build.log"; then
  echo "FAIL: bazel build //kernels:all warned:"; grep "WARNING" "$work/build.log"; exit 1
fi
echo "ok: bazel build //kernels:all prints no warning"

PATH="/usr/bin:/bin:$PATH:/opt/elsewhere" "${bazel[@]}" build //kernels:all 2>"$work/again.log"
if ! grep -q "INFO: 1 process: 1 internal" "$work/again.log"; then
  echo "FAIL: a changed PATH re-ran actions:"; grep "process" "$work/again.log"; exit 1
fi
echo "ok: a changed PATH rebuilds no PTX set"
