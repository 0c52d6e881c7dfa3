#!/usr/bin/env bash
# Prepared in sessions 49-50, in priority order (a call cut at its limit keeps what ran: each
# group prints its line as it ends; rename the folder to its date-gpuNN). Three opt-in paths:
# * batch 1's o_proj asking L2 for the next gate_up's weights past its first wave
#   (ATLAS_GEMV_L2_NEXT_MB=16, _WAIT=1 after the wait; gemv_bf16_l2next[_wait]_single) on
#   Llama-3.2-1B and Qwen3-1.7B (73% / 68% of copy at gpu177, bar 75%), then Qwen3-8B / 4B;
# * the add + norm letting the projection after it launch only once its rows have landed
#   (ATLAS_NORM_LATE=1, add_rmsnorm[_offset]_late_bf16) on Qwen3.5-35B-A3B (its norm after
#   the MoE down 3.79 us of the critical path vs the 30B's 2.63, gpu177) and Llama-3.2-1B;
# * the prefill RMSNorm a warp a row (ATLAS_NORM_WARP=1), kernel-table rows.
# Then defaults set from H100 data re-checked on this card: the 35B's tiled MoE gate/up,
# gate_up + SwiGLU in 4-row blocks (1.7B, L-1B), NVFP4 h2 rows 4. Both orders everywhere.
# batch 1 x 512, GPU replay / async wall ms a step.
# Prepare: CUOBJDUMP=.. bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=3 t 150 chk python3 tools/gpu/check_kernels.py -m gemv -m rmsnorm -k l2next -k lean -k x8 \
  -k warp -k rows -k late
N16=ATLAS_GEMV_L2_NEXT_MB=16; W16="ATLAS_GEMV_L2_NEXT_MB=16 ATLAS_GEMV_L2_NEXT_WAIT=1"
NL=ATLAS_NORM_LATE=1
m=llama-3.2-1b
PL=45 b1 ${m}_def X=1 $G/$m; PL=45 b1 ${m}_n16 $N16 $G/$m; PL=45 b1 ${m}_w16 "$W16" $G/$m
PL=45 b1 ${m}_nl $NL $G/$m; PL=45 b1 ${m}_w16b "$W16" $G/$m; PL=45 b1 ${m}_n16b $N16 $G/$m
PL=45 b1 ${m}_nlb $NL $G/$m; PL=45 b1 ${m}_defb X=1 $G/$m
echo "== L1B off $(aw ${m}_def)| 16 $(aw ${m}_n16)| 16w $(aw ${m}_w16)| late $(aw ${m}_nl)|" \
  "16w $(aw ${m}_w16b)| 16 $(aw ${m}_n16b)| late $(aw ${m}_nlb)| off $(aw ${m}_defb)"
for v in def n16 w16 nl; do sed -n '/^critical path/,/^between/p' $L/${m}_$v.log 2>/dev/null \
  | sed -n 3,8p | cut -c1-100 | sed "s/^/L1B $v /"; done
m=qwen3-1.7b
PL=45 b1 ${m}_def X=1 $G/$m; PL=45 b1 ${m}_n16 $N16 $G/$m; PL=45 b1 ${m}_w16 "$W16" $G/$m
PL=45 b1 ${m}_w16b "$W16" $G/$m; PL=45 b1 ${m}_n16b $N16 $G/$m; PL=45 b1 ${m}_defb X=1 $G/$m
echo "== 1.7B off $(aw ${m}_def)| 16 $(aw ${m}_n16)| 16w $(aw ${m}_w16)| 16w $(aw ${m}_w16b)|" \
  "16 $(aw ${m}_n16b)| off $(aw ${m}_defb)"
Q35=$G/qwen3_5-35b-a3b
PL=80 b1 q35_def X=1 $Q35; PL=80 b1 q35_nl $NL $Q35; PL=80 b1 q35_nlb $NL $Q35
PL=80 b1 q35_defb X=1 $Q35
echo "== 35B off $(aw q35_def)| late $(aw q35_nl)| late $(aw q35_nlb)| off $(aw q35_defb)"
for v in def nl; do grep -E "^add_rmsnorm|^gemv_bf16_single +add_rmsnorm" $L/q35_$v.log \
  | cut -c1-100 | sed "s/^/q35 $v /"; done
m=qwen3-8b
PL=50 b1 ${m}_def X=1 $G/$m; PL=50 b1 ${m}_n16 $N16 $G/$m; PL=50 b1 ${m}_n16b $N16 $G/$m
PL=50 b1 ${m}_defb X=1 $G/$m
echo "== 8B off $(aw ${m}_def)| 16 $(aw ${m}_n16)| 16 $(aw ${m}_n16b)| off $(aw ${m}_defb)"
# the plain prefill RMSNorm a warp a row (ATLAS_NORM_WARP=1) against the block form and
# PyTorch (gpu141, H200: 12.79 vs 11.5 us), kernel-table rows, twice each
NK="rmsnorm qwen3-8b prefill"
kt norm X=1 -k "$NK"; kt normw ATLAS_NORM_WARP=1 -k "$NK"; kt normw2 ATLAS_NORM_WARP=1 -k "$NK"
kt norm2 X=1 -k "$NK"
TI=ATLAS_MOE_GATE_UP_TILED=1
PL=80 b1 q35_ti $TI $Q35; PL=80 b1 q35_tib $TI $Q35
echo "== 35B tiled gate/up $(aw q35_ti)| $(aw q35_tib) (off above)"
m=qwen3-4b
PL=50 b1 ${m}_def X=1 $G/$m; PL=50 b1 ${m}_n16 $N16 $G/$m; PL=50 b1 ${m}_n16b $N16 $G/$m
PL=50 b1 ${m}_defb X=1 $G/$m
echo "== 4B off $(aw ${m}_def)| 16 $(aw ${m}_n16)| 16 $(aw ${m}_n16b)| off $(aw ${m}_defb)"
S4=ATLAS_GEMV_SWIGLU_ROWS=4
for m in qwen3-1.7b llama-3.2-1b; do PL=45 b1 ${m}_s4 $S4 $G/$m; PL=45 b1 ${m}_s4b $S4 $G/$m
  echo "== $m swiglu rows 4: $(aw ${m}_s4)| $(aw ${m}_s4b) (off above)"; done
N=$G/q-nvfp4-head/qwen3-8b; H4=ATLAS_QUANT_H2_ROWS=4
PL=60 b1 nv_r4 $H4 $N; PL=60 b1 nv_r8 X=1 $N; PL=60 b1 nv_r4b $H4 $N
echo "== nvfp4 8B rows4 $(aw nv_r4)| rows8 $(aw nv_r8)| rows4 $(aw nv_r4b)"
echo "ALL DONE"
