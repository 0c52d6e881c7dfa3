#!/usr/bin/env bash
# Make .device/git.tar: a shallow clone's .git of HEAD without blobs over 1 KB (~1 MB instead of
# ~22; git reads only the small ones, symbolic links among them, to tell a path is unchanged),
# so a device call can carry it beside .device's PTX sets within the 64 MiB a call allows.
# One file, not a folder of small ones. `atlas gate record` names the commit and the
# uncommitted kernel paths from it (the call scripts unpack it into .git when the tree has
# none, then run `git status` once: a blob-less clone's `git diff HEAD` needs the refreshed
# index).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git clone -q --depth 1 --filter=blob:limit=1k --no-checkout \
  --upload-pack="git -c uploadpack.allowFilter=true upload-pack" "file://$REPO" "$tmp/c"
git -C "$tmp/c" read-tree HEAD
rm -rf "$tmp/c/.git/hooks" && mkdir -p "$REPO/.device"
tar cf "$REPO/.device/git.tar" -C "$tmp/c/.git" .
echo "$(git -C "$tmp/c" rev-parse --short HEAD) -> .device/git.tar ($(du -sh "$REPO/.device/git.tar" | cut -f1))"
