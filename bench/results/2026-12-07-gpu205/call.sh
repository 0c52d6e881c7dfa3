#!/usr/bin/env bash
# session 59, H200 preferred (~7 min): the split prefill attention (short chunks past long
# histories: GQA-packed rows, keys split across the idle SMs, a merge) checked and timed,
# and the time to first token with it and the 0.5 ms GIL switch interval.
#   1. check_kernels -m attention_sm90 (the plain entries' cases, and the split cases);
#   2. profile_prefill of the warm request (24 tokens past 2,040 cached) with the split
#      entry at min tiles 2 (default), 1 and 4, and off (ATLAS_PREFILL_ATTN_SPLIT=0), and
#      default / off with ATLAS_PDL=0 (each kernel row its own time); of a 16-token prompt
#      (packing alone) default and off;
#   3. profile_ttft (serve() now at 0.5 ms; again at Python's 5 ms);
#   4. on an H200: call_head.sh's h200_gates (a generated Qwen3-8B checkpoint served, the
#      four gate records in their order at this HEAD).
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh.
#   Carry [".device", ".whl"] (tests/fixtures moved aside).
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
cp .device/qwen3-tok/tokenizer*.json $G/qwen3-8b/
TAILN=3 t 150 chk python3 tools/gpu/check_kernels.py -m attention_sm90 --out $R/chk.json
pf() { local name=$1; shift; TAILN=0 t 60 pf_$name env "$@" python3 tools/gpu/profile_prefill.py \
  --model $G/qwen3-8b --synthetic-seed 0 --out $R/pf_$name.json $PF_ARGS; }
PF_ARGS="--tokens 24 --cached 2040"
pf warm X=1; pf warm_t1 ATLAS_PREFILL_ATTN_SPLIT_MIN_TILES=1; pf warm_t4 ATLAS_PREFILL_ATTN_SPLIT_MIN_TILES=4
pf warm_off ATLAS_PREFILL_ATTN_SPLIT=0
pf warm_np ATLAS_PDL=0; pf warm_off_np ATLAS_PDL=0 ATLAS_PREFILL_ATTN_SPLIT=0
PF_ARGS="--tokens 16"; pf p16 X=1; pf p16_off ATLAS_PREFILL_ATTN_SPLIT=0
TAILN=0 t 200 ttft python3 tools/gpu/profile_ttft.py --model $G/qwen3-8b --synthetic-seed 0 \
  --switch-intervals 0.005 --out $R/ttft.json
for n in warm warm_t1 warm_t4 warm_off warm_np warm_off_np p16 p16_off; do
  echo "pf_$n: $(grep -m1 'wall per step' $L/pf_$n.log) | $(grep -m1 -E 'prefill_attn' $L/pf_$n.log | cut -c1-90)"
  grep -E "merge" $L/pf_$n.log | head -1 | cut -c1-90; done
grep -E "^== |median" $L/ttft.log | cut -c1-150
grep -E "passed|failed|FAIL" $L/chk.log | tail -3
h200_gates
echo "ALL DONE"
