#!/usr/bin/env bash
# session-47: on an H200, the standings (gpu171's call). On any other card: gemv_bf16_lean_single
# (48 registers, a block more an SM) where it runs a batch-1 projection in fewer waves
# (ops/matmul.saves_a_wave: Qwen3-4B's down and o_proj, Qwen3-30B-A3B's qkv, Qwen3-14B's qkv /
# o_proj / down, Gemma-3-4B's qkv and down) against ATLAS_GEMV_LEAN=0. gpu172 capped every
# batch-1 GEMV: Qwen3-4B -2.5%, Qwen3-30B-A3B -1.4%, losses only where the waves stayed the same.
# Expect the 4B and the 30B at least as fast as gpu172's capped runs (3.032 / 2.887 ms).
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh.
#   Carry [".device", ".whl"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "import sys; from pathlib import Path; from bench_moe import synthetic_model_dir; synthetic_model_dir('qwen3-14b', Path(sys.argv[1]))" $G
TAILN=2 t 100 chk python3 tools/gpu/check_kernels.py -m gemv -k "gemv lean" -k "gemv m1 "
OFF=ATLAS_GEMV_LEAN=0
for m in qwen3-4b qwen3-30b-a3b qwen3-14b gemma-3-4b; do PL=60 b1 ${m}_lean X=1 $G/$m; PL=60 b1 ${m}_off $OFF $G/$m; done
echo "== batch 1 x 512: GPU replay / async wall ms a step (lean where it saves a wave | ATLAS_GEMV_LEAN=0)"
for m in qwen3-4b qwen3-30b-a3b qwen3-14b gemma-3-4b; do printf "%-14s lean %s| off %s\n" $m "$(aw ${m}_lean)" "$(aw ${m}_off)"; done
for m in qwen3-4b qwen3-30b-a3b qwen3-14b gemma-3-4b; do echo "-- $m"; for v in lean off; do sed -n '/^critical path/,/^between/p' $L/${m}_$v.log \
  | grep -E "^gemv_bf16_(lean_)?single|^decode_attn|^add_rmsnorm" | cut -c1-110 | sed "s/^/$v /"; done; done
echo "ALL DONE"
