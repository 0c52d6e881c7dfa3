#!/usr/bin/env bash
# session-37 call B: gpu122's failures again, with the check-side fixes of this session, then gpu123's trace.
# 1. the modules gpu122's `checks` failed in: rmsnorm (norm_add_rmsnorm_offset: the residual moved one ulp of the
#    normalized delta, now a reference tolerance of 2^-6 as the oracle has), moe_grouped / moe_grouped_sm90 (the
#    act rows of a tile's padding held the GLU of the biases, which the check compared with zeros: now slots' rows
#    only), gemm_decode_tma / gemm_decode_sm90 (a GLU input near a bf16 tie rounded the other way: now the
#    per-element slack of cases/gemv.py glu_flip_slack).
# 2. gpt-oss-20b-4l made on the device (no SDPA control: transformers has no SDPA path with sinks) and its parity.
# 3. gpu123's batch-1 attention phase trace.
# Repo root, carry [".device", ".whl"]; .device/head_src.tgz is `git archive HEAD py tools kernels` of the call.
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m rmsnorm -m moe_grouped -m moe_grouped_sm90 \
  -m gemm_decode_tma -m gemm_decode_sm90 --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head -20
TAILN=2 t 150 mk_goss python3 tools/make_fixtures.py --config gpt-oss-20b-4l --device cuda --out $C/gpt-oss-20b-4l
TAILN=12 t 120 par_goss python3 tools/gpu/model_parity.py --backend cuda --model $C/gpt-oss-20b-4l --tail \
  --out $R/parity_gpt-oss-20b-4l.json
TAILN=60 t 150 trace python3 tools/gpu/trace_decode_attn.py --long --trace-only --keys 512 \
  --heads qwen3-0.6b,qwen2.5-1.5b,qwen3-30b-a3b
echo "ALL DONE"
