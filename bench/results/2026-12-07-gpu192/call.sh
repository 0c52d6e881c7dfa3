#!/usr/bin/env bash
# Session 54 (an H100 came; the command line of the call, cut at the session's device budget
# during Qwen3-4B's fourth run): the batch-1 decode attention's PDL trigger on the ungated
# rope entries, the default late twins (the next kernel launches once the K/V landed) against
# the trigger on entry (ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=0), batch 1 x 512, orders
# late / early / early / late, at f8895f4e.
rm -rf py tools kernels && tar xzf .device/head_src.tgz && source tools/gpu/call_head.sh \
  && nvidia-smi --query-gpu=name --format=csv,noheader && E="ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=0" \
  && for m in qwen3-30b-a3b qwen3-8b qwen3-4b; do for v in late:X=1 early:$E earlyb:$E lateb:X=1; do
       PL=35 prof ${m}_${v%%:*} "${v#*:}" --model $G/$m --batch 1 --context 512 > /dev/null; done
     echo "== $m late $(aw ${m}_late)| early $(aw ${m}_early)| early $(aw ${m}_earlyb)| late $(aw ${m}_lateb)"; done
