#!/usr/bin/env bash
# session-46 call A: the gated launch's splits merge together, a share each (SpreadMerge),
# instead of the last block merging 8 heads x 256 x 9 splits alone (gpu164: 5.0 us alone, 9.6
# in a step). The gated checks (a 4,200-key case on 64 splits added); the trace with every
# block's stamps (the new `arrived` phase); Qwen3.5-35B-A3B batch 1 x 512 GPU ms a step gated
# on / off / off / on, NVFP4 on / off. Expect: the merging blocks' tail 5.0 -> ~2 us alone, the
# gated launch's span in the graph ~19 -> ~12 us, the step on below off.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m attention_long -k gated
TAILN=0 t 200 trace python3 tools/gpu/trace_decode_attn.py --long --gated --heads qwen3.5-35b-a3b \
  --keys 538 --trace-only --dump $R/trace_blocks.npz  # and block_lines: last vs median block
grep -E "^shape|qwen3.5" $L/trace.log | cut -c1-330
sed -n '/ keyed of /,$p' $L/trace.log | cut -c1-400
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
