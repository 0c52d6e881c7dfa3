#!/usr/bin/env bash
# session-42 call B: the row loop of the plain RMSNorm and the embedding gather (row_loop.cuh,
# ATLAS_ROWS_PER_BLOCK). gpu138
# (H100) timed the plain norm of a Qwen3-8B 2,048-token prefill at 20.53 us (54% of copy,
# 0.65x PyTorch's 13.35) where the add + RMSNorm, two waves of blocks, streams at 83%: one
# wave of 2,048 one-row blocks loads, reduces and stores in step. Expected with 2-8 rows a
# block (the next row's loads under the current row's stores): ~12-14 us (~75-85% of copy);
# the embedding gather of 2,048 rows (12.89 us, 86%, 0.85x) the same way: ~11 us.
# First the rmsnorm and embedding checks (the loop cases force 2-5 rows a block whatever the
# env says), then the table's rows at ATLAS_ROWS_PER_BLOCK = 1 (today's grid) .. 8, then the
# decode GEMM's own table rows (the route the models take at 9+ rows; gpu138 timed gemv_mma
# forced there). ~4 min. No tests/fixtures needed.
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 90 checks python3 tools/gpu/check_kernels.py -m rmsnorm -m embedding --out $R/checks.json
for n in 1 2 3 4 8 1; do KLIM=60 kt "rows_$n" "ATLAS_ROWS_PER_BLOCK=$n" -k rmsnorm -k embedding; done
KLIM=200 kt dgemm "X=1" -k decode_gemm_sm90
echo "== 2,048 rows of 4,096 by rows a block (us ours / torch): plain RMSNorm | embedding gather"
row() { grep -E "^ +$1 .*prefill 2048" $L/kt_rows_$2.log | grep -oE 'ours +[0-9.]+ us +torch +[0-9.]+ us +[0-9.]+x' | head -1; }
for n in 1 2 3 4 8; do printf "rows/block %s: %s | %s\n" $n "$(row rmsnorm $n)" "$(row embedding $n)"; done
echo "ALL DONE"
