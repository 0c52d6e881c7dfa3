#!/usr/bin/env bash
# session-44 call A: the TMA decode GEMM's stream-K entries (ATLAS_DECODE_GEMM_STREAMK):
# device checks of every gemm_decode_tma case (the ring refactor touches the cluster and
# persistent entries too), the tuner with and without stream-K candidates on Qwen3-8B and
# Qwen3-4B / Qwen3-30B-A3B widths at 16..128 rows (tools/gpu/tune_decode_gemm.py: picks timed
# cold), and the Qwen3-8B batch-64 x 1,536 step with / without, both orders.
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=3 t 200 chk python3 tools/gpu/check_kernels.py -m gemm_decode_tma
grep -cE " PASS$" $L/chk.log; grep -E " FAIL" $L/chk.log | head -20 | cut -c1-160
for sk in 0 1; do
  TAILN=0 t 120 tune_sk$sk env ATLAS_DECODE_GEMM_STREAMK=$sk python3 tools/gpu/tune_decode_gemm.py \
    -k qwen3-8b -k qwen3-4b -k qwen3-30b --rows 16,32,64,128 --out $R/tune_sk$sk.json
done
PLIM=100 prof b64_sk1 "ATLAS_DECODE_GEMM_STREAMK=1" --model $G/qwen3-8b --batch 64 --context 1536
PLIM=100 prof b64_sk0 "ATLAS_DECODE_GEMM_STREAMK=0" --model $G/qwen3-8b --batch 64 --context 1536
PLIM=100 prof b64_sk0b "ATLAS_DECODE_GEMM_STREAMK=0" --model $G/qwen3-8b --batch 64 --context 1536
PLIM=100 prof b64_sk1b "ATLAS_DECODE_GEMM_STREAMK=1" --model $G/qwen3-8b --batch 64 --context 1536
echo "== tuner picks, stream-K off / on (cold us)"
for sk in 0 1; do echo "-- STREAMK=$sk"; grep -E "qwen3-8b|qwen3-4b|qwen3-30b" $L/tune_sk$sk.log | cut -c1-150 | head -60; done
echo "== b64 x 1,536 (GPU replay / async wall ms)"
for n in b64_sk1 b64_sk0 b64_sk0b b64_sk1b; do printf "%-9s %s\n" $n "$(aw $n)"; done
for n in b64_sk0 b64_sk1; do echo "-- $n"; sed -n '/^critical path/,/^between/p' $L/$n.log | head -9 | cut -c1-110; done
echo "ALL DONE"
