#!/usr/bin/env bash
# Prepared in session 49, unrun (its device time went to gpu177 and to starts that failed or
# were taken back; rename the folder to its date-gpuNN). First the prefill RMSNorm a warp a
# row (ATLAS_NORM_WARP=1, kernel-table rows, below); then batch 1's o_proj asking L2 for the
# next gate_up's weights (ATLAS_GEMV_L2_NEXT_MB,
# gemv_bf16_l2next[_wait]_single): its device checks, then batch 1 x 512 (GPU replay / async
# wall ms a step) of Llama-3.2-1B and Qwen3-1.7B (73% / 68% of copy at gpu177) off / 16 MiB /
# 16 MiB after the wait / the same back / off, and 32 MiB once; Qwen3-8B and Qwen3-4B off / on.
# Then two defaults set from H100 data, on this card: Qwen3-1.7B / Llama-3.2-1B gate_up +
# SwiGLU in 4-row blocks (ATLAS_GEMV_SWIGLU_ROWS=4); the 35B's tiled MoE gate/up
# (ATLAS_MOE_GATE_UP_TILED=1); NVFP4 Qwen3-8B h2 rows 4 (ATLAS_QUANT_H2_ROWS=4). Both orders.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh.
#   Carry .device, .whl.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=3 t 150 chk python3 tools/gpu/check_kernels.py -m gemv -m rmsnorm -k l2next -k lean -k x8 \
  -k warp -k rows
# the plain prefill RMSNorm a warp a row (ATLAS_NORM_WARP=1) against the block form and
# PyTorch (gpu141, H200: 12.79 vs 11.5 us), kernel-table rows, twice each
NK="rmsnorm qwen3-8b prefill"
kt norm X=1 -k "$NK"; kt normw ATLAS_NORM_WARP=1 -k "$NK"; kt normw2 ATLAS_NORM_WARP=1 -k "$NK"
kt norm2 X=1 -k "$NK"
N16=ATLAS_GEMV_L2_NEXT_MB=16; W16="ATLAS_GEMV_L2_NEXT_MB=16 ATLAS_GEMV_L2_NEXT_WAIT=1"
N32=ATLAS_GEMV_L2_NEXT_MB=32
for m in llama-3.2-1b qwen3-1.7b; do
  PL=45 b1 ${m}_def X=1 $G/$m; PL=45 b1 ${m}_n16 $N16 $G/$m; PL=45 b1 ${m}_w16 "$W16" $G/$m
  PL=45 b1 ${m}_w16b "$W16" $G/$m; PL=45 b1 ${m}_n16b $N16 $G/$m; PL=45 b1 ${m}_defb X=1 $G/$m
  PL=45 b1 ${m}_n32 $N32 $G/$m
done
for m in qwen3-8b qwen3-4b; do
  PL=50 b1 ${m}_def X=1 $G/$m; PL=50 b1 ${m}_n16 $N16 $G/$m; PL=50 b1 ${m}_n16b $N16 $G/$m
  PL=50 b1 ${m}_defb X=1 $G/$m
done
echo "== o_proj's L2 prefetch of the gate_up, batch 1 x 512, GPU replay / async wall ms"
for m in llama-3.2-1b qwen3-1.7b; do
  printf "%-13s off %s| 16 %s| 16w %s| 16w %s| 16 %s| off %s| 32 %s\n" $m "$(aw ${m}_def)" \
    "$(aw ${m}_n16)" "$(aw ${m}_w16)" "$(aw ${m}_w16b)" "$(aw ${m}_n16b)" "$(aw ${m}_defb)" \
    "$(aw ${m}_n32)"
done
for m in qwen3-8b qwen3-4b; do
  printf "%-13s off %s| 16 %s| 16 %s| off %s\n" $m "$(aw ${m}_def)" "$(aw ${m}_n16)" \
    "$(aw ${m}_n16b)" "$(aw ${m}_defb)"
done
for v in def n16 w16; do sed -n '/^critical path/,/^between/p' $L/llama-3.2-1b_$v.log \
  | sed -n 3,8p | cut -c1-100 | sed "s/^/L1B $v /"; done
S4=ATLAS_GEMV_SWIGLU_ROWS=4
for m in qwen3-1.7b llama-3.2-1b; do PL=45 b1 ${m}_s4 $S4 $G/$m; PL=45 b1 ${m}_s4b $S4 $G/$m; done
Q35=$G/qwen3_5-35b-a3b; TI=ATLAS_MOE_GATE_UP_TILED=1
PL=80 b1 q35_ti $TI $Q35; PL=80 b1 q35_def X=1 $Q35; PL=80 b1 q35_tib $TI $Q35
N=$G/q-nvfp4-head/qwen3-8b; H4=ATLAS_QUANT_H2_ROWS=4
PL=60 b1 nv_r4 $H4 $N; PL=60 b1 nv_r8 X=1 $N; PL=60 b1 nv_r4b $H4 $N
echo "== defaults from H100 data on this card (batch 1 x 512)"
for m in qwen3-1.7b llama-3.2-1b; do
  printf "%-13s swiglu rows 4: %s| %s (defaults above)\n" $m "$(aw ${m}_s4)" "$(aw ${m}_s4b)"; done
printf "q35 tiled %s| def %s| tiled %s\n" "$(aw q35_ti)" "$(aw q35_def)" "$(aw q35_tib)"
printf "nvfp4 8B rows4 %s| rows8 %s| rows4 %s\n" "$(aw nv_r4)" "$(aw nv_r8)" "$(aw nv_r4b)"
echo "ALL DONE"
