#!/usr/bin/env bash
# session-45 call C: gpu157 again after the D-256 merge took two items a trip (gates with them):
# batch-1 gated full attention in one launch (ATLAS_DECODE_ATTN_LONG_GATED,
# decode_attn_long_rope_early[_late]_gated_d256_bf16). Device checks of every attention_long case
# (the gated five; the other entries' PTX moved registers only), the gate kernels (attn_gate,
# the o_proj GEMV that gates its x: sigmoid_gated moved into bf16_vec.cuh); Qwen3.5-35B-A3B
# batch 1 x 512 GPU ms a step on / off / off / on, bf16 and NVFP4 (synthetic weights).
# Prepare: bash tools/gpu/prep_device.sh (all hopper sets: the 35B leaf);
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 240 chk python3 tools/gpu/check_kernels.py -m attention_long -m attn_gate -m gemv -k long -k gate
grep -cE " PASS$" $L/chk.log; grep -E " FAIL" $L/chk.log | head -20 | cut -c1-170
grep -E "gated" $L/chk.log | cut -c1-170
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
