#!/usr/bin/env bash
# session-44 call B: where the tuner takes stream-K on the published dense widths (all of
# tools/gpu/tune_decode_gemm.py's, 16 and 64 rows, with and without the candidates), and the
# batch-64 step of two configs whose gate_up tiles leave a part-empty last wave (Qwen3-4B:
# 152 two-warpgroup tiles; Llama-3.1-8B: 224) with / without.
# Prepare as gpu148 (same HEAD's kernels). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for sk in 0 1; do
  TAILN=0 t 150 tune_sk$sk env ATLAS_DECODE_GEMM_STREAMK=$sk python3 tools/gpu/tune_decode_gemm.py \
    --rows 16,64 --out $R/tune_sk$sk.json
done
for m in qwen3-4b llama-3.1-8b; do
  for sk in 1 0 1; do
    PLIM=100 prof b64_${m}_sk$sk "ATLAS_DECODE_GEMM_STREAMK=$sk" --model $G/$m --batch 64 --context 1536
    mv $L/b64_${m}_sk$sk.log $L/b64_${m}_sk${sk}_$(date +%s).log 2>/dev/null
  done
done
echo "== tuner, stream-K off / on: changed picks and totals"
for sk in 0 1; do echo "-- STREAMK=$sk"; grep -E "picks changed" $L/tune_sk$sk.log; done
grep -E "tuned \(0, " $L/tune_sk1.log | cut -c1-130
echo "== b64 x 1,536 (GPU replay / async wall ms), in call order"
for f in $(ls -tr $L/b64_*.log); do printf "%-36s %s\n" "$(basename $f .log)" "$(grep -oE 'GPU per step \(graph replay\) [0-9.]+|async scheduling: wall per step [0-9.]+' $f | grep -oE '[0-9.]+$' | tr '\n' ' ')"; done
for f in $(ls -tr $L/b64_qwen3-4b_sk*.log | head -2); do echo "-- $(basename $f)"; sed -n '/^critical path/,/^between/p' $f | head -8 | cut -c1-110; done
echo "ALL DONE"
