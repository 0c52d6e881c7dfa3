#!/usr/bin/env bash
# session 59, after gpu205 (H100): the split entry's A/B where it splits. gpu205's
# profile_prefill ran a batch-1 runner, whose partial buffers held 16 (token, split) pairs:
# the 24-token warm chunk got packing alone (8 blocks walking every key: 71.6 us a layer vs
# 60.5 plain). Now packing needs two splits or more, and the buffers hold 64 rows at least.
#   1. check_kernels -m attention_sm90;
#   2. profile_prefill of the warm request (24 tokens past 2,040 cached): split (min tiles
#      2: 8 splits) / off / min tiles 1 (16 splits), with ATLAS_PDL=0 (kernel rows: the
#      split entry + merge against prefill_attn_sm90_wide_bf16), then split / off with PDL
#      (wall per step);
#   3. profile_ttft with the split entry and with ATLAS_PREFILL_ATTN_SPLIT=0;
#   4. on an H200: call_head.sh's h200_gates (the four gate records at this HEAD).
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh.
#   Carry [".device", ".whl"] (tests/fixtures moved aside).
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
cp .device/qwen3-tok/tokenizer*.json $G/qwen3-8b/
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m attention_sm90 --out $R/chk.json
pf() { local name=$1; shift; TAILN=0 t 60 pf_$name env "$@" python3 tools/gpu/profile_prefill.py \
  --model $G/qwen3-8b --synthetic-seed 0 --tokens 24 --cached 2040 --out $R/pf_$name.json; }
pf np ATLAS_PDL=0; pf off_np ATLAS_PDL=0 ATLAS_PREFILL_ATTN_SPLIT=0
if [ -z "${QUICK:-}" ]; then  # QUICK=1: the kernel rows and the TTFT A/B only
  pf t1_np ATLAS_PDL=0 ATLAS_PREFILL_ATTN_SPLIT_MIN_TILES=1
  pf pdl X=1; pf off_pdl ATLAS_PREFILL_ATTN_SPLIT=0
fi
TAILN=0 t 120 ttft python3 tools/gpu/profile_ttft.py --model $G/qwen3-8b --synthetic-seed 0 \
  --out $R/ttft.json
TAILN=0 t 120 ttft_off env ATLAS_PREFILL_ATTN_SPLIT=0 python3 tools/gpu/profile_ttft.py \
  --model $G/qwen3-8b --synthetic-seed 0 --out $R/ttft_off.json
for n in np off_np t1_np pdl off_pdl; do
  [ -f $L/pf_$n.log ] || continue
  echo "pf_$n: $(grep -m1 'wall per step' $L/pf_$n.log)"
  grep -E "prefill_attn" $L/pf_$n.log | cut -c1-90; done
for n in ttft ttft_off; do echo "== $n"; grep -E "^== (engine|server)|^(cold|warm|short) " $L/$n.log | cut -c1-110; done
[ -n "${NO_GATES:-}" ] || h200_gates  # NO_GATES=1: a budget without room for them
echo "ALL DONE"
