#!/usr/bin/env bash
# session-17 call C (lead): batch-1 decode attention's split length. The step's split count comes from
# model/step_inputs.py decode_splits (at most ceil(max_seq_len / DECODE_MIN_KEYS_PER_SPLIT)): here that constant is
# set per run (tools-only wrapper below), so context 568 runs 18 splits of 32 keys (default), or 9 / 5 / 3 longer ones.
# Session-16 kernels (.device/kernels_a.tar.xz); Qwen3-30B-A3B and Qwen3-8B batch 1. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
mkdir -p .device/kernels_a && tar xJf .device/kernels_a.tar.xz -C .device/kernels_a
export ATLAS_KERNELS_DIR=$PWD/.device/kernels_a
sp() {  # sp NAME MIN_KEYS MODEL
  TAILN=0 t 75 "$1" python3 -c "import sys, runpy; sys.argv = ['profile_decode.py', '--synthetic-seed', '0', '--model', '$3', '--batch', '1', '--context', '512', '--out', '$R/$1.json']; import atlas.model.step_inputs as s; s.DECODE_MIN_KEYS_PER_SPLIT = $2; runpy.run_path('tools/gpu/profile_decode.py', run_name='__main__')"
  echo "  $1: $(hdr $1 | head -1 | cut -c1-110) | $(grep -E '^decode_attn' $L/$1.log | head -1 | cut -c1-80)"
}
for k in 32 64 128 256 32; do sp s30_$k $k $G/qwen3-30b-a3b; done
for k in 32 128 256; do sp s8_$k $k $G/qwen3-8b; done
echo "ALL DONE"
