#!/usr/bin/env bash
# CI's image check (root, Linux, no GPU; needs mmdebstrap and the Debian mirror the lock
# names): builds the image of the default CPU target (hardware hopper, the CPU backend's
# default, for the default model smollm2-135m in bf16: the leaf that runs it, PTX sets
# without modules) twice from scratch, compares the digests, unpacks it, checks it holds
# only that leaf's PTX set,
# and runs its entry point in a chroot (new mount + PID namespaces) against the default
# model mounted read-only: "What is the capital of France?" must be answered with "Paris".
# Prints image size and build times. Took 7-10 minutes here on 2 cores shared with other
# jobs (load average about 20), most of it mmdebstrap; less on an idle CI machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/py${PYTHONPATH:+:$PYTHONPATH}"
export ATLAS_SKIP_BUILD=1
work="${ATLAS_IMAGE_CHECK_DIR:-/tmp/atlas-image-check}"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

models="$(python3 -c 'from atlas.runtime.model_paths import ensure_default_model as e; print(e().parent)')"
target=(--target-hw hopper --target-model smollm2-135m --target-quant bf16)
for name in first second; do
  start=$SECONDS
  python3 -m atlas_cli.main image build "${target[@]}" --out "$work/$name" \
    --cache-dir "$work/cache"  # wheels are fetched once (and hash-checked both times)
  echo "image build ($name): $((SECONDS - start))s"
done
du -sh "$work/first" | sed 's/^/image layout on disk: /'
python3 tools/image/check_image.py "$work/first" "$work/second" "${target[@]}" \
  --models "$models" --rootfs "$work/rootfs"
