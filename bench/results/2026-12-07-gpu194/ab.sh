#!/usr/bin/env bash
# Prepared in session 54 (any card): the batch-1 decode attention's PDL trigger where gpu192
# did not measure it. Since afab4284 ungated attention triggers on entry and gated attention
# (Qwen3.5) keeps its late twin (ops/attention_long.late_trigger_pays). Here, the default
# against the other choice (ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1 on the ungated configs,
# =0 on the gated 35B), batch 1 x 512, GPU ms a step, default / other / other / default:
# Qwen3.5-35B-A3B, Llama-3.1-8B, Qwen3-4B, Mistral-7B-v0.3 and Qwen2.5-7B.
# (expected: entry ahead on the ungated ones as on gpu192's Qwen3-4B / 8B / 30B-A3B; the 35B
# unknown).
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
ab() {  # ab NAME DIR OTHER_ENV
  local n=$1 d=$2 o=$3
  for v in def:X=1 oth:$o othb:$o defb:X=1; do
    PLIM=40 prof ${n}_${v%%:*} "${v#*:}" --model $d --batch 1 --context 512 > /dev/null; done
  echo "== $n default $(aw ${n}_def)| $o $(aw ${n}_oth)| $(aw ${n}_othb)| default $(aw ${n}_defb)"
}
LATE=ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1; ENTRY=ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=0
ab q35 $G/qwen3_5-35b-a3b $ENTRY
ab l8 $G/llama-3.1-8b $LATE
if [ -z "${AB_SHORT:-}" ]; then  # short.sh: the first two only
  ab q4 $G/qwen3-4b $LATE
  ab m7 $G/mistral-7b-v0.3 $LATE
  ab q25 $G/qwen2.5-7b $LATE
fi
echo "ALL DONE"
