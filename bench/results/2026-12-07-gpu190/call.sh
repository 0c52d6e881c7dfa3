#!/usr/bin/env bash
# Session 54 (any card): the sampler's finishing blocks now report the rows' logprobs (the
# logprobs_f32 launch that ended every decode graph is gone; the ask read under the
# finisher's reduction) and a decode-shaped step's LM head reads the normed rows in place
# (no row gather before it). Checks of the sampler module; batch 1 x 512, this HEAD against
# the tree before both (7718843a: its py and sampler PTX, .device/old_py.tgz and the `old`
# delta) on one machine, orders new / old / old / new. Expected: ~2-3 us a step less (the
# critical path's embedding_bf16 ~0.9 us and logprobs_f32 ~1.1 us rows gone; gpu189's
# 0.6B tail 106.9 -> 104.3 us, which another H100 could not tell from its clocks).
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/oldpy && tar xzf .device/old_py.tgz -C /tmp/oldpy
OLD="PYTHONPATH=/tmp/oldpy/py:$PWD/tools:$PWD/tools/gpu:/tmp/site ATLAS_KERNELS_DIR=$PWD/.device/kernels_old"
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m sampler
ab() {  # ab NAME DIR
  local n=$1 d=$2
  for v in new:X=1 old:"$OLD" oldb:"$OLD" newb:X=1; do
    PLIM=${PL:-75} prof ${n}_${v%%:*} "${v#*:}" --model $d --batch 1 --context 512; done
  echo "== $n new $(aw ${n}_new)| old $(aw ${n}_old)| old $(aw ${n}_oldb)| new $(aw ${n}_newb)"
}
for m in qwen3-0.6b llama-3.2-1b qwen3-8b qwen3_5-35b-a3b qwen3-30b-a3b; do PL=40 ab $m $G/$m; done
echo "ALL DONE"
