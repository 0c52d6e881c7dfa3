#!/usr/bin/env bash
# session-42 call B: the plain RMSNorm's row loop (rmsnorm.cu rmsnorm_rows, 5ce951e5). gpu138
# (H100) timed the plain norm of a Qwen3-8B 2,048-token prefill at 20.53 us (54% of copy,
# 0.65x PyTorch's 13.35) where the add + RMSNorm, two waves of blocks, streams at 83%: one
# wave of 2,048 one-row blocks loads, reduces and stores in step. Expected with 2-8 rows a
# block (the next row's loads under the current row's stores): ~12-14 us (~75-85% of copy).
# First the rmsnorm checks (the loop cases force 2-5 rows a block whatever the env says),
# then the table's norm rows at ATLAS_NORM_ROWS_PER_BLOCK = 1 (today's grid) .. 8, then the
# decode GEMM's own table rows (the route the models take at 9+ rows; gpu138 timed gemv_mma
# forced there). ~4 min. No tests/fixtures needed.
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 90 checks python3 tools/gpu/check_kernels.py -m rmsnorm --out $R/checks.json
for n in 1 2 3 4 8 1; do KLIM=60 kt "norm_r$n" "ATLAS_NORM_ROWS_PER_BLOCK=$n" -k rmsnorm; done
KLIM=200 kt dgemm "X=1" -k decode_gemm_sm90
echo "== the plain norm of 2,048 x 4,096 rows by rows a block (us ours / torch)"
for n in 1 2 3 4 8; do
  printf "rows/block %s: %s\n" $n "$(grep -E 'rmsnorm qwen3-8b prefill 2048' $L/kt_norm_r$n.log | grep -v add_ | grep -oE 'ours +[0-9.]+ us +torch +[0-9.]+ us +[0-9.]+x' | head -1)"
done
echo "ALL DONE"
