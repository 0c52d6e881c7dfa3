#!/usr/bin/env bash
# session-30 call C: the GEMV threads' two-chunk rule (gemv_threads, 45fffd44) at batch 2, where the CUDA-core
# GEMV's ring twin (gemv_ring_*, its plan from the same threads) runs every product: default against
# ATLAS_GEMV_CHUNKS=1 on Qwen3-0.6B (both orders), Llama-3.2-1B, Qwen3-1.7B and Qwen3-30B-A3B. PTX of 67e4dee8.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
C1="ATLAS_GEMV_CHUNKS=1"
bn d06 "X=1" $G/qwen3-0.6b 2; bn d06_c1 "$C1" $G/qwen3-0.6b 2; bn d06_c1b "$C1" $G/qwen3-0.6b 2; bn d06b "X=1" $G/qwen3-0.6b 2
bn l1 "X=1" $G/llama-3.2-1b 2; bn l1_c1 "$C1" $G/llama-3.2-1b 2
bn q17 "X=1" $G/qwen3-1.7b 2; bn q17_c1 "$C1" $G/qwen3-1.7b 2
bn m30 "X=1" $G/qwen3-30b-a3b 2; bn m30_c1 "$C1" $G/qwen3-30b-a3b 2
echo "== GPU ms a step (graph replay), PDL on, batch 2 x 512: two chunks a thread (default) / ATLAS_GEMV_CHUNKS=1"
echo "d06 $(step d06) / $(step d06b)  c1 $(step d06_c1) / $(step d06_c1b)"
for n in l1 q17 m30; do echo "$n $(step $n)  c1 $(step ${n}_c1)"; done
echo "ALL DONE"
