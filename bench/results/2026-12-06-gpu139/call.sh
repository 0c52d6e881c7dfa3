#!/usr/bin/env bash
# session-41 call C (prepared, not run: the session's device time went to five failed starts
# and gpu137 / gpu138): the batch-1 add + RMSNorm A/B. gpu137 (H100) put the norm at 2.09 us
# on the critical path at 1,024 wide and 3.76-3.81 at 2,560-4,096 (one 16-byte vector a
# thread: 512-thread blocks at 4,096), 273 us of Qwen3-8B FP8's 3.110 ms step, which is 39 us
# short of issue 12's 1.75x. Two knobs, each alone and together, against the default:
#   V4 = ATLAS_NORM_DECODE_VECS=4 (128-thread blocks at 4,096: a 4-warp block reduction)
#   EN = ATLAS_EARLY_TRIGGER=norm (the projection after the norm launches before its wait:
#        gpu102 measured it at one row as mixed, -3.3% on 8B NVFP4, +1.7% on 0.6B)
# First the rmsnorm check cases at 4 and 2 vectors a thread (the kernel's multi-vector path
# at decode rows), then batch 1 x 512 profiles, both orders where it decides a ratio.
# No tests/fixtures needed: leave them behind if the tree is over 64 MiB with .device.
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
V4=ATLAS_NORM_DECODE_VECS=4; EN=ATLAS_EARLY_TRIGGER=norm
TAILN=2 t 60 checks_v4 env $V4 python3 tools/gpu/check_kernels.py -m rmsnorm --out $R/checks_v4.json
TAILN=2 t 60 checks_v2 env ATLAS_NORM_DECODE_VECS=2 python3 tools/gpu/check_kernels.py -m rmsnorm \
  --out $R/checks_v2.json
b1() { PLIM=${PL:-75} prof "$1" "$2" --model $3 --batch 1 --context 512; }
Q8=$G/qwen3-8b; F8=$G/q-fp8-block-head/qwen3-8b; N4=$G/q-nvfp4-head/qwen3-8b
b1 q8 X=1 $Q8; b1 q8_v4 $V4 $Q8; b1 f8 X=1 $F8; b1 f8_v4 $V4 $F8; b1 f8_en $EN $F8
b1 f8_v4en "$V4 $EN" $F8; b1 f8_2 X=1 $F8; b1 f8_v4_2 $V4 $F8; b1 q8_v4_2 $V4 $Q8; b1 q8_2 X=1 $Q8
b1 n4 X=1 $N4; b1 n4_v4 $V4 $N4; b1 n4_en $EN $N4; b1 n4_v4en "$V4 $EN" $N4
b1 q06 X=1 $G/qwen3-0.6b; b1 q06_v4 $V4 $G/qwen3-0.6b
PL=120 b1 q30 X=1 $G/qwen3-30b-a3b; PL=120 b1 q30_v4 $V4 $G/qwen3-30b-a3b
PL=120 b1 q30_en $EN $G/qwen3-30b-a3b
PL=120 b1 q35 X=1 $G/qwen3_5-35b-a3b; PL=120 b1 q35_v4 $V4 $G/qwen3_5-35b-a3b
PL=120 b1 q35_en $EN $G/qwen3_5-35b-a3b
echo "== batch 1 x 512: GPU replay / async wall ms a step | the norm on the critical path (us a call)"
aw() { grep -oE "GPU per step \(graph replay\) [0-9.]+|async scheduling: wall per step [0-9.]+" $L/$1.log | grep -oE "[0-9.]+$" | tr '\n' ' '; }
nm() { grep -E "^add_rmsnorm[a-z_]* +[a-z]" $L/$1.log | awk '{printf "%s after %s %s; ", $1, $2, $(NF-1)}'; }
for n in q8 q8_v4 q8_v4_2 q8_2 f8 f8_v4 f8_en f8_v4en f8_2 f8_v4_2 n4 n4_v4 n4_en n4_v4en q06 q06_v4 \
  q30 q30_v4 q30_en q35 q35_v4 q35_en; do printf "%-9s %s| %s\n" $n "$(aw $n)" "$(nm $n | cut -c1-150)"; done
echo "ALL DONE"
