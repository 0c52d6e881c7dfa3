#!/usr/bin/env bash
# session-48: on an H200, the standings at this HEAD (gpu171's call; NVFP4's split decode, the
# per-SM occupancy query, the narrow SwiGLU twin and the lean GEMV twin all new to one). On any
# other card:
# 1. The occupancy queries side by side: blocks the device holds (per-SM query x SMs, the one
#    resident_blocks asks now for one-block launches, vs the cluster query at cluster 1, which
#    stopped at 8 an SM in gpu174) for the batch-1 GEMVs and their twins, the MoE tiled gate/up
#    and the NVFP4 h2 GEMV. Expect the lean GEMV at 128 threads 10 an SM (1,320) vs 9.
# 2. Batch 1 at this HEAD vs the same kernels with the previous Python (.device/prev_py.tgz:
#    the cluster query everywhere) where the counts can change a route: Qwen3-30B-A3B (its qkv,
#    1,280 blocks of 128 threads, should take the lean twin: gpu172 7.44 -> 6.63 us),
#    Qwen3.5-35B-A3B, Qwen3-1.7B, Llama-3.2-1B / -3B, Qwen3-8B; both orders on the 30B.
# 3. FP8's half-precision-FMA GEMV in 8-row blocks (gemv_fp8_h2x8_*, new: ATLAS_QUANT_FP8_H2=1
#    ATLAS_QUANT_H2_ROWS=8) against the default convert GEMV and the 4-row h2 (session 15:
#    slower than the convert GEMV, though it issues half the instructions): checks, kernel-
#    table rows, Qwen3-8B FP8-block (LM head quantized) batch 1. Expect the 8-row blocks to
#    stream as NVFP4's do (gate_up 89% of copy on an H100) where the 4-row ones did not.
# 4. The E2M1 odd bytes by multiply-high (variant set mulhi, -D ATLAS_E2M1_ODD_MULHI=1: one ALU
#    instruction a word moved to IMAD.HI): h2 checks, kernel-table rows, Qwen3-8B NVFP4 batch 1
#    both orders. Expect ~1% on the h2 GEMVs if the ALU pipe still binds.
# Prepare: ATLAS_PREP_VARIANT="mulhi:ATLAS_E2M1_ODD_MULHI=1" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz; git archive 10bef353
#   py | gzip -9 > .device/prev_py.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh; xz -t .device/*.tar.xz. Carry [".device", ".whl"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mkdir -p /tmp/prev && tar xzf .device/prev_py.tgz -C /tmp/prev
PREV="PYTHONPATH=/tmp/prev/py:$PWD/tools:$PWD/tools/gpu:/tmp/site"
t 60 resident python3 - <<'PY'
from atlas.kernels.registry import load_registry
from atlas.runtime.cuda import CudaBackend
from atlas.runtime import kernel_abi as abi

registry = load_registry()
images = {}
for target in registry.targets():
    if target.hw != "hopper":
        continue
    ps = registry.select_target(target.hw, target.model, target.quant)
    for name in ("gemv", "moe_decode", "gemv_nvfp4"):
        if name in ps.modules and name not in images:
            images[name] = ps.modules[name].image()
be = CudaBackend(modules=images)
sms = be.device_facts().sm_count
sigs = (abi.GEMV_SINGLE, abi.GEMV_LEAN_SINGLE, abi.GEMV_SWIGLU_X8_SINGLE,
        abi.GEMV_SWIGLU_X8N_SINGLE, abi.MOE_GATE_UP_GEMV_TILES, abi.GEMV_NVFP4_H2X8)
print("blocks held: per-SM query x SMs / cluster query (cluster 1), by block width")
for sig in sigs:
    h = be.kernel(sig.module, sig.func)
    row = [f"{t}:{be.blocks_per_sm(h, t, 0) * sms}/{be.max_active_clusters(h, t, 0, 1)}"
           for t in range(64, 257, 32)]
    print(f"{sig.func:32s}", " ".join(row))
PY
cat $L/resident.log
H8="ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_ROWS=8"
TAILN=2 t 150 chk_fp8 python3 tools/gpu/check_kernels.py -m gemv_fp8 -k h2 --out $R/chk_fp8.json
KLIM=100 kt fp8 X=1 -k "b1 fp8-block"
KLIM=100 kt fp8x8 "ATLAS_QUANT_H2_ROWS=8" -k "b1 fp8-block h2"
F=$G/q-fp8-block-head/qwen3-8b
PL=75 b1 f8_def X=1 $F; PL=75 b1 f8_h2x8 "$H8" $F; PL=75 b1 f8_h2x4 ATLAS_QUANT_FP8_H2=1 $F
PL=75 b1 f8_h2x8b "$H8" $F; PL=75 b1 f8_defb X=1 $F
V="ATLAS_KERNELS_DIR=$PWD/.device/kernels_mulhi"
TAILN=2 t 150 chk_mulhi env $V python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -k h2 --out $R/chk_mulhi.json
KLIM=100 kt split X=1 -k "b1 nvfp4 h2"
KLIM=100 kt mulhi "$V" -k "b1 nvfp4 h2"
N=$G/q-nvfp4-head/qwen3-8b
PL=75 b1 nv_split X=1 $N; PL=75 b1 nv_mulhi "$V" $N; PL=75 b1 nv_mulhi2 "$V" $N; PL=75 b1 nv_split2 X=1 $N
MS="qwen3-30b-a3b qwen3_5-35b-a3b qwen3-1.7b llama-3.2-3b"
for m in $MS; do PL=60 b1 ${m}_head X=1 $G/$m; PL=60 b1 ${m}_prev "$PREV" $G/$m; done
PL=60 b1 qwen3-30b-a3b_prev2 "$PREV" $G/qwen3-30b-a3b; PL=60 b1 qwen3-30b-a3b_head2 X=1 $G/qwen3-30b-a3b
echo "== FP8: kernel table rows (convert GEMV | h2 4-row | h2 8-row)"
for v in fp8 fp8x8; do grep -E "^\| " $L/kt_$v.log | grep -v "^| kernel\|^|---" \
  | awk -F'|' -v v=$v '{printf "%-6s %-44s %8s %10s %5s\n", v, substr($3,1,44), $6, $9, $10}'; done
echo "== Qwen3-8B FP8-block (head quantized) batch 1 x 512: GPU replay / async wall ms"
printf "def %s| h2x8 %s| h2x4 %s| h2x8 %s| def %s\n" "$(aw f8_def)" "$(aw f8_h2x8)" "$(aw f8_h2x4)" \
  "$(aw f8_h2x8b)" "$(aw f8_defb)"
for v in def h2x8; do sed -n '/^critical path/,/^between/p' $L/f8_$v.log | grep -E "^gemv_fp8" \
  | cut -c1-110 | sed "s/^/$v /"; done
echo "== batch 1 x 512, GPU replay / async wall ms: HEAD (per-SM query) | previous Python (cluster query)"
for m in $MS; do printf "%-16s head %s| prev %s\n" $m "$(aw ${m}_head)" "$(aw ${m}_prev)"; done
echo "qwen3-30b-a3b again: prev $(aw qwen3-30b-a3b_prev2)| head $(aw qwen3-30b-a3b_head2)"
for m in $MS; do for v in head prev; do sed -n '/^kernel  .*calls/,/^critical/p' $L/${m}_$v.log \
  | grep -E "^gemv_bf16_(lean_)?single|^moe_gate_up" | cut -c1-80 | sed "s/^/$m $v /"; done; done
echo "== kernel table, NVFP4 h2 rows: split (HEAD) | mulhi"
for v in split mulhi; do grep -E "^\| " $L/kt_$v.log | grep -v "^| kernel\|^|---" \
  | awk -F'|' -v v=$v '{printf "%-6s %-44s %8s %10s %5s\n", v, substr($3,1,44), $6, $9, $10}'; done
echo "== Qwen3-8B NVFP4 (head quantized) batch 1 x 512: GPU replay / async wall ms"
printf "split %s| mulhi %s| mulhi %s| split %s\n" "$(aw nv_split)" "$(aw nv_mulhi)" \
  "$(aw nv_mulhi2)" "$(aw nv_split2)"
echo "ALL DONE"
