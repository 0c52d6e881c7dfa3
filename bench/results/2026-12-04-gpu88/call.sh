#!/usr/bin/env bash
# session-24 call D: the MoE down's fused norm tail was also the default at decode batches 2..8 (the row-group down
# kernel's ticket + last-block RMSNorm); its removal (03ba53fc) measured there: tree c3b0edf4 with its PTX (`old`)
# against this tree, batch 8 x 512, old / new / new / old, on Qwen3.5-35B-A3B, Qwen3-30B-A3B and Qwen3.5-35B-A3B NVFP4
# (the cluster router runs at batch 1 only, so batch 8 differs by the tail alone). Repo root, carry
# [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
mkdir -p /tmp/old && tar xJf .device/old_tree.tar.xz -C /tmp/old
oldprof() {
  TAILN=0 t 100 "$1" env PYTHONPATH=/tmp/old/py:/tmp/old/tools:/tmp/old/tools/gpu:/tmp/site \
    ATLAS_KERNELS_DIR=$PWD/.device/kernels_old python3 /tmp/old/tools/gpu/profile_decode.py --synthetic-seed 0 \
    --model $2 --batch 8 --context 512 --out "$R/$1.json"
  echo "  $1: $(hdr "$1" | head -1 | cut -c1-150)"
}
b8() { PLIM=60 prof "$1" "X=1" --model $2 --batch 8 --context 512; }
for m in "m35:$G/qwen3_5-35b-a3b" "m30:$G/qwen3-30b-a3b" "n35:$G/q-nvfp4/qwen3_5-35b-a3b"; do
  k=${m%%:*}; p=${m#*:}
  oldprof ${k}_old1 $p
  b8 ${k}_new1 $p
  b8 ${k}_new2 $p
  oldprof ${k}_old2 $p
done
echo "== batch 8 x 512, GPU ms a step (graph replay), PDL on: c3b0edf4 (fused down tail) vs this tree"
for k in m35 m30 n35; do
  echo "$k  old $(step ${k}_old1) / $(step ${k}_old2)   new $(step ${k}_new1) / $(step ${k}_new2)"
  for v in old1 new1; do
    echo "  $v:"; sed -n '/^kernel  /,/^critical/p' $L/${k}_$v.log | grep -E "^moe_|^add_rmsnorm" | awk '{printf "    %-44s %s calls %s us\n", $1, $2, $4}'
  done
done
echo "ALL DONE"
