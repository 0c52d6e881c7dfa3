#!/usr/bin/env bash
# session-42's one-call plan when device time runs short (the starts kept failing): the
# checks of the kernels changed since the last device run, then the most telling half of
# gpu139's batch-1 norm A/B, then gpu140's row-loop sweep. Order = priority.
#   1. check_kernels rmsnorm + embedding (row_loop.cuh's loop, add_rmsnorm_row's refactor:
#      the default decode path's norms run this code)
#   2. batch 1 x 512 profiles: V4 = ATLAS_NORM_DECODE_VECS=4, EN = ATLAS_EARLY_TRIGGER=norm
#      (see gpu139/call.sh for why), 8B FP8 both orders, 8B bf16 / NVFP4 / 0.6B / 35B
#   3. the table's rmsnorm and embedding rows at ATLAS_ROWS_PER_BLOCK = 1, 4, 2 (gpu140)
# No tests/fixtures needed. Prepare as gpu139. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 90 checks python3 tools/gpu/check_kernels.py -m rmsnorm -m embedding --out $R/checks.json
V4=ATLAS_NORM_DECODE_VECS=4; EN=ATLAS_EARLY_TRIGGER=norm
Q8=$G/qwen3-8b; F8=$G/q-fp8-block-head/qwen3-8b; N4=$G/q-nvfp4-head/qwen3-8b
b1 f8 X=1 $F8; b1 f8_v4 $V4 $F8; b1 f8_en $EN $F8; b1 f8_v4_2 $V4 $F8; b1 f8_2 X=1 $F8
b1 q8 X=1 $Q8; b1 q8_v4 $V4 $Q8; b1 n4 X=1 $N4; b1 n4_v4 $V4 $N4
b1 q06 X=1 $G/qwen3-0.6b; b1 q06_v4 $V4 $G/qwen3-0.6b
PL=120 b1 q35 X=1 $G/qwen3_5-35b-a3b; PL=120 b1 q35_v4 $V4 $G/qwen3_5-35b-a3b
for n in 1 4 2; do KLIM=60 kt "rows_$n" "ATLAS_ROWS_PER_BLOCK=$n" -k rmsnorm -k embedding; done
echo "== batch 1 x 512: GPU replay / async wall ms a step | the norm on the critical path (us a call)"
nm() { grep -E "^add_rmsnorm[a-z_]* +[a-z]" $L/$1.log | awk '{printf "%s after %s %s; ", $1, $2, $(NF-1)}'; }
for n in f8 f8_v4 f8_en f8_v4_2 f8_2 q8 q8_v4 n4 n4_v4 q06 q06_v4 q35 q35_v4; do
  printf "%-9s %s| %s\n" $n "$(aw $n)" "$(nm $n | cut -c1-150)"; done
echo "== 2,048 rows of 4,096 by rows a block (us ours / torch): plain RMSNorm | embedding gather"
row() { grep -E "^ +$1 .*prefill 2048" $L/kt_rows_$2.log | grep -oE 'ours +[0-9.]+ us +torch +[0-9.]+ us +[0-9.]+x' | head -1; }
for n in 1 4 2; do printf "rows/block %s: %s | %s\n" $n "$(row rmsnorm $n)" "$(row embedding $n)"; done
echo "ALL DONE"
