#!/usr/bin/env bash
# session-45 call G: the D-256 split merge weighs each head once (gpu161: the last block's
# merge ~5.5 us alone, 9.3 under o_proj's weights); as gpu161 (the late gated entries trigger
# after their block merge, not at the last
# tile (gpu160: o_proj's weight flood stretched each block's merge and partial stores 2.6 ->
# 7.1 us). The gated checks; the graph-mode trace again; Qwen3.5-35B-A3B batch 1 x 512 GPU ms
# a step gated on / off / off / on, NVFP4 on / off.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 120 chk python3 tools/gpu/check_kernels.py -m attention_long -k gated -k D256
TAILN=0 t 240 trace python3 tools/gpu/trace_decode_attn.py --long --gated --heads qwen3.5-35b-a3b \
  --keys 538 --trace-only
grep -E "^shape|gated" $L/trace.log | cut -c1-330
PL=90 b1 q35_on "ATLAS_DECODE_ATTN_LONG_GATED=1" $G/qwen3_5-35b-a3b
PL=90 b1 q35_off "ATLAS_DECODE_ATTN_LONG_GATED=0" $G/qwen3_5-35b-a3b
PL=90 b1 q35_off2 "ATLAS_DECODE_ATTN_LONG_GATED=0" $G/qwen3_5-35b-a3b
PL=90 b1 q35_on2 "ATLAS_DECODE_ATTN_LONG_GATED=1" $G/qwen3_5-35b-a3b
PL=90 b1 q35n_on "ATLAS_DECODE_ATTN_LONG_GATED=1" $G/q-nvfp4/qwen3_5-35b-a3b
PL=90 b1 q35n_off "ATLAS_DECODE_ATTN_LONG_GATED=0" $G/q-nvfp4/qwen3_5-35b-a3b
echo "== Qwen3.5-35B-A3B b1 x 512 (GPU replay / async wall ms)"
for n in q35_on q35_off q35_off2 q35_on2 q35n_on q35n_off; do printf "%-9s %s\n" $n "$(aw $n)"; done
for n in q35_on q35_off; do echo "-- $n"; sed -n '/^critical path/,/^between/p' $L/$n.log | grep -E "attn|rope|gate_mul|combine|gemv_bf16_single +(decode|sigmoid|qk)" | cut -c1-110; done
echo "ALL DONE"
