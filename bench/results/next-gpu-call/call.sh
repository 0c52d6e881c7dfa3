#!/usr/bin/env bash
# Prepared in session 47 for the next device call (rename the folder to its date-gpuNN): on an
# H200, the standings at this HEAD (gpu171's call: the gate records, the sweep, batch 1 of every
# config, where the narrow SwiGLU twin and the lean GEMV twin have not yet run); on any other
# card, the occupancy query's fix (cuda.py: a 65,536-block grid, b1d3bea3): the resident blocks
# the driver now reports for gemv_bf16_single / its lean twin and the 8-row SwiGLU / its narrow
# twin at each block width (expect 132 x 9 = 1,188 vs 1,320 at 128 threads, no longer 1,024),
# then Qwen3-30B-A3B (its qkv should now take the lean twin: gpu172 7.44 -> 6.63 us) and
# Qwen3-4B batch 1, lean by waves vs ATLAS_GEMV_LEAN=0, both orders.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh;
#   xz -t .device/*.tar.xz. Carry [".device", ".whl"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
t 60 resident python3 - <<'PY'
from atlas.kernels.registry import load_registry
from atlas.runtime.cuda import CudaBackend
from atlas.runtime.kernel_abi import (GEMV_LEAN_SINGLE, GEMV_SINGLE, GEMV_SWIGLU_X8_SINGLE,
                                      GEMV_SWIGLU_X8N_SINGLE)
from atlas.runtime.ops import KernelCache

registry = load_registry()
target = next(t for t in registry.targets() if t.hw == "hopper")
ps = registry.select_target(target.hw, target.model, target.quant)
kc = KernelCache(CudaBackend(modules={"gemv": ps.modules["gemv"].image()}))
for sig in (GEMV_SINGLE, GEMV_LEAN_SINGLE, GEMV_SWIGLU_X8_SINGLE, GEMV_SWIGLU_X8N_SINGLE):
    counts = [kc.resident_blocks(kc.get(sig).handle, t, 0, 1) for t in range(64, 257, 32)]
    print(f"{sig.func:32s}", " ".join(f"{t}:{c}" for t, c in zip(range(64, 257, 32), counts)))
PY
cat $L/resident.log
OFF=ATLAS_GEMV_LEAN=0
for m in qwen3-30b-a3b qwen3-4b; do PL=60 b1 ${m}_lean X=1 $G/$m; PL=60 b1 ${m}_off $OFF $G/$m
  PL=60 b1 ${m}_off2 $OFF $G/$m; PL=60 b1 ${m}_lean2 X=1 $G/$m; done
for m in qwen3-30b-a3b qwen3-4b; do printf "%-14s lean %s| off %s| off %s| lean %s\n" $m "$(aw ${m}_lean)" \
  "$(aw ${m}_off)" "$(aw ${m}_off2)" "$(aw ${m}_lean2)"; done
for m in qwen3-30b-a3b qwen3-4b; do for v in lean off; do sed -n '/^critical path/,/^between/p' $L/${m}_$v.log \
  | grep -E "^gemv_bf16_(lean_)?single" | cut -c1-110 | sed "s/^/$m $v /"; done; done
echo "ALL DONE"
