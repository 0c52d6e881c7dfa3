#!/usr/bin/env bash
# Session 54 (any card; an H100 came): the sampler's finishing blocks report the rows'
# logprobs (no logprobs_f32 launch in a decode graph) and a decode-shaped step's LM head reads
# the normed rows in place (no row gather). Checks of the sampler, embedding and norm modules;
# batch 1 x 512 at 639a0676 on seven configs with the step's last critical-path rows.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m sampler -m embedding -m rmsnorm
tail_rows() {  # the step's last critical-path rows of run $1
  sed -n '/^critical path/,/^between/p' $L/$1.log \
    | grep -E "^(sample_f32|logprobs_f32|apply_penalties|embedding_bf16|gemv_bf16_f32)" \
    | cut -c1-110 | sed "s/^/$1 /"
}
for m in qwen3-0.6b llama-3.2-1b qwen3-1.7b qwen3-4b qwen3-8b qwen3_5-35b-a3b qwen3-30b-a3b; do
  PL=40 b1 $m X=1 $G/$m; done
for m in qwen3-0.6b llama-3.2-1b qwen3-1.7b qwen3-4b qwen3-8b qwen3_5-35b-a3b qwen3-30b-a3b; do
  echo "== $m $(aw $m)"; tail_rows $m; done
echo "ALL DONE"
