#!/usr/bin/env bash
# session-46 call A: the gated launch's splits merge together, a share each (SpreadMerge),
# instead of the last block merging 8 heads x 256 x 9 splits alone (gpu164: 5.0 us alone, 9.6
# in a step). The gated checks (a 4,200-key case on 64 splits added); the trace with every
# block's stamps (the new `arrived` phase); Qwen3.5-35B-A3B batch 1 x 512 GPU ms a step gated
# on / off / off / on, NVFP4 on / off. Expect: the merging blocks' tail 5.0 -> ~2 us alone, the
# gated launch's span in the graph ~19 -> ~12 us, the step on below off. Then the same spread
# merge on the early D-64 / 128 entries (variant set `spread`, -D ATLAS_LONG_SPREAD_EARLY=1):
# their checks, Qwen3-30B-A3B (group 8: the last block merges two items a thread) and
# Qwen3-8B (group 4: one) batch 1 x 512, default / spread / spread / default.
# Prepare: ATLAS_PREP_VARIANT="spread:ATLAS_LONG_SPREAD_EARLY=1" bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
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
SP="ATLAS_KERNELS_DIR=$PWD/.device/kernels_spread"
TAILN=2 t 150 chk_spread env $SP python3 tools/gpu/check_kernels.py -m attention_long -k early
PL=90 b1 q30_def "" $G/qwen3-30b-a3b
PL=90 b1 q30_sp "$SP" $G/qwen3-30b-a3b
PL=90 b1 q30_sp2 "$SP" $G/qwen3-30b-a3b
PL=90 b1 q30_def2 "" $G/qwen3-30b-a3b
PL=90 b1 q8_def "" $G/qwen3-8b
PL=90 b1 q8_sp "$SP" $G/qwen3-8b
echo "== Qwen3.5-35B-A3B b1 x 512 (GPU replay / async wall ms)"
for n in q35_on q35_off q35_off2 q35_on2 q35n_on q35n_off q30_def q30_sp q30_sp2 q30_def2 q8_def q8_sp; do printf "%-9s %s\n" $n "$(aw $n)"; done
for n in q35_on q35_off q30_def q30_sp; do echo "-- $n"; sed -n '/^critical path/,/^between/p' $L/$n.log | grep -E "attn|rope|gate_mul|combine|gemv_bf16_single +(decode|sigmoid|qk)" | cut -c1-110; done
echo "ALL DONE"
