#!/usr/bin/env bash
# session-48: on an H200, the standings at this HEAD (gpu171's call: the gate records, the
# sweep, batch 1 of every config; the narrow SwiGLU twin, the lean GEMV twin and NVFP4's split
# decode have not run on one). On any other card:
# 1. NVFP4's split decode (quant_decode.cuh e2m1x8_to_f16x2_split: the E4M3 byte words
#    converted as they are, x's pairs built in the same order, two PRMTs of 13 ALU-pipe
#    instructions per 8 codes gone) against the own-order decode (variant set nosplit, -D
#    ATLAS_NVFP4_H2_SPLIT=0): the h2 checks on both builds, the kernel-table rows, Qwen3-8B
#    NVFP4 (LM head quantized) batch 1 both orders. Expect: the h2 GEMVs a few % faster where
#    the ALU pipe binds (Nsight, gpu79: ALU 59-62% busy at 41% of DRAM), ~2-4% off the step.
# 2. The occupancy query's fix (cuda.py: a 65,536-block grid, b1d3bea3): the resident blocks
#    the driver reports for gemv_bf16_single / its lean twin and the 8-row SwiGLU / its narrow
#    twin (expect 1,188 vs 1,320 at 128 threads, no longer 1,024), then Qwen3-30B-A3B (its qkv
#    should now take the lean twin: gpu172 7.44 -> 6.63 us) and Qwen3-4B batch 1, lean by
#    waves vs ATLAS_GEMV_LEAN=0, both orders.
# Prepare: ATLAS_PREP_VARIANT="nosplit:ATLAS_NVFP4_H2_SPLIT=0" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz; git rev-parse --short
#   HEAD > .device/commit; bash tools/gpu/prep_git.sh; xz -t .device/*.tar.xz.
#   Carry [".device", ".whl"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
V="ATLAS_KERNELS_DIR=$PWD/.device/kernels_nosplit"
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -k h2 --out $R/chk.json
TAILN=2 t 150 chk_nosplit env $V python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -k h2 --out $R/chk_nosplit.json
KLIM=100 kt split X=1 -k "b1 nvfp4 h2"
KLIM=100 kt nosplit "$V" -k "b1 nvfp4 h2"
N=$G/q-nvfp4-head/qwen3-8b
PL=75 b1 nv_split X=1 $N; PL=75 b1 nv_nosplit "$V" $N; PL=75 b1 nv_nosplit2 "$V" $N; PL=75 b1 nv_split2 X=1 $N
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
echo "== kernel table, NVFP4 h2 rows: split | own order (nosplit)"
for v in split nosplit; do grep -E "^\| " $L/kt_$v.log | grep -v "^| kernel\|^|---" \
  | awk -F'|' -v v=$v '{printf "%-8s %-44s %8s %10s %5s\n", v, substr($3,1,44), $6, $9, $10}'; done
echo "== Qwen3-8B NVFP4 (head quantized) batch 1 x 512: GPU replay / async wall ms"
printf "split %s| nosplit %s| nosplit %s| split %s\n" "$(aw nv_split)" "$(aw nv_nosplit)" \
  "$(aw nv_nosplit2)" "$(aw nv_split2)"
for v in split nosplit; do sed -n '/^critical path/,/^between/p' $L/nv_$v.log | grep -E "^gemv_nvfp4" \
  | cut -c1-110 | sed "s/^/$v /"; done
echo "== lean by waves vs ATLAS_GEMV_LEAN=0"
for m in qwen3-30b-a3b qwen3-4b; do printf "%-14s lean %s| off %s| off %s| lean %s\n" $m "$(aw ${m}_lean)" \
  "$(aw ${m}_off)" "$(aw ${m}_off2)" "$(aw ${m}_lean2)"; done
for m in qwen3-30b-a3b qwen3-4b; do for v in lean off; do sed -n '/^critical path/,/^between/p' $L/${m}_$v.log \
  | grep -E "^gemv_bf16_(lean_)?single" | cut -c1-110 | sed "s/^/$m $v /"; done; done
echo "ALL DONE"
