#!/usr/bin/env bash
# session-38 call B (session 37's gpu126, which never ran): batch 1's qkv GEMV adding Qwen2's biases itself (gemv_bias_bf16_single) against the GEMV then
# bias_add (the default until this call: ATLAS_GEMV_BIAS=1 turns the fused GEMV on), in one call. Expected: the bias_add launch (~0.7 us a layer on the H100) and most
# of the early attention entry's lost lead (0.44 us after bias_add vs 1.67 after a GEMV, gpu125) come back:
# ~2 us a layer, ~55 us a step on Qwen2.5-1.5B (28 layers).
# 1. checks: -k gemv_bias (the fused entry vs its oracle and, bit for bit, vs the GEMV then bias_add) and bias_add.
# 2. tiny-qwen2 / tiny-qwen2-swa parity on CUDA (the fused route on the model's decode steps).
# 3. batch-1 GPU ms a step at 512 keys: Qwen2.5-1.5B / 0.5B, on / off / on, and 7B.
# Repo root, carry [".device", ".whl"]; .device/head_src.tgz is `git archive HEAD py tools kernels` of the call.
tar xzf .device/head_src.tgz || exit 3

source tools/gpu/call_head.sh
TAILN=3 t 120 checks python3 tools/gpu/check_kernels.py -k gemv_bias -m bias_add --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head
for f in tiny-qwen2 tiny-qwen2-swa; do
  TAILN=1 t 60 "tiny_$f" env ATLAS_GEMV_BIAS=1 python3 tools/gpu/model_parity.py --backend cuda --model tests/fixtures/$f --out $R/parity_$f.json
done
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
for m in qwen2.5-1.5b:q15 qwen2.5-0.5b:q05 qwen2.5-7b:q7; do
  n=${m%%:*}; s=${m##*:}
  b1 ${s}_on "ATLAS_GEMV_BIAS=1" $n; b1 ${s}_off "X=1" $n; b1 ${s}_on2 "ATLAS_GEMV_BIAS=1" $n
done
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1 x 512: fused bias / GEMV + bias_add / fused bias"
for s in q15 q05 q7; do echo "$s $(step ${s}_on) $(step ${s}_off) $(step ${s}_on2)"; done
echo "ALL DONE"
