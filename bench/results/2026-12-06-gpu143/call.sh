#!/usr/bin/env bash
# session-43 call A (prepared in session 42, not run): order = priority, ~7 min.
#   1. device checks of the bf16 / FP8 8-row GEMV twins (`-k x8`; host-checked only so far)
#      and the RMSNorm at its new default grid (3 rows a block for prefills)
#   2. the small dense configs under 75% of copy at batch 1 on the H200 (gpu142: Qwen3-1.7B
#      68%, Qwen3-4B 73%, Llama-3.2-1B 73%) with and without ATLAS_GEMV_ROWS=8 (32 KiB blocks
#      at k 2,048: the per-block-cost hypothesis of docs/kernels.md "8-row blocks", never run
#      on bf16), both orders where it decides; Qwen3-8B and -0.6B as controls
#   3. the kernel table's "dgemm" rows, now timing the tuned launch (gpu142 timed the split
#      rule: Qwen3-4B gate_up b64 0.47x)
#   4. (H200 only) the four gate records at this HEAD (gpu142's are OPEN: the kernels moved)
# No tests/fixtures needed. Prepare: ATLAS_PREP_SETS="hopper__common__*" bash
#   tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh.
#   Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 120 checks python3 tools/gpu/check_kernels.py -m gemv -m gemv_fp8 -m rmsnorm -k x8 \
  -k rmsnorm --out $R/checks.json
R8=ATLAS_GEMV_ROWS=8
for m in qwen3-1.7b qwen3-4b llama-3.2-1b; do
  b1 ${m}_def X=1 $G/$m; b1 ${m}_r8 $R8 $G/$m; b1 ${m}_r8_2 $R8 $G/$m; b1 ${m}_def2 X=1 $G/$m
done
for m in qwen3-8b qwen3-0.6b; do b1 ${m}_def X=1 $G/$m; b1 ${m}_r8 $R8 $G/$m; done
KLIM=120 kt dgemm "X=1" -k dgemm
KLIM=40 kt norm "X=1" -k rmsnorm
h200_gates
echo "== batch 1 x 512: GPU replay / async wall ms a step (default, 8-row GEMV blocks)"
for m in qwen3-1.7b qwen3-4b llama-3.2-1b qwen3-8b qwen3-0.6b; do
  printf "%-13s def %s| r8 %s| r8 %s| def %s\n" $m "$(aw ${m}_def)" "$(aw ${m}_r8)" \
    "$(aw ${m}_r8_2 2>/dev/null)" "$(aw ${m}_def2 2>/dev/null)"; done
echo "ALL DONE"
