#!/usr/bin/env bash
# session-39 call C: where the async loop's ~20 us a step past the graph replay goes
# (profile_decode's new step-boundary trace: the span between replays and the copies in it),
# and the runner's step / input events without timing (CU_EVENT_DISABLE_TIMING, cae7745b)
# against the same tree with timed events ("timed": the two create_event calls patched back),
# alternating. Expected: the span ~20 us holding an H2D (inputs), a D2D (the carried token)
# and a D2H (the sampled ids); untimed events a microsecond or less.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
T=/tmp/timed; mkdir -p $T && tar xzf .device/head_src.tgz -C $T \
  && sed -i 's/create_event(timing=False)/create_event()/' $T/py/atlas/model/runner.py
grep -c "create_event()" $T/py/atlas/model/runner.py
pt() {  # pt NAME MODEL: profile_decode from the timed-events tree
  TAILN=0 t 90 "$1" env PYTHONPATH=$T/py:$T/tools:$T/tools/gpu:/tmp/site python3 \
    $T/tools/gpu/profile_decode.py --synthetic-seed 0 --model $G/$2 --batch 1 --context 512 --out $R/$1.json
  echo "  $1: $(hdr "$1" | tail -1 | cut -c1-150)"
}
b1() { PLIM=90 prof "$1" "X=1" --model $G/$2 --batch 1 --context 512; hdr "$1" | tail -1 | cut -c1-150; }
b1 q06_new qwen3-0.6b; pt q06_timed qwen3-0.6b; b1 q06_new2 qwen3-0.6b; pt q06_timed2 qwen3-0.6b
b1 l1_new llama-3.2-1b; pt l1_timed llama-3.2-1b
b1 q8_new qwen3-8b
for n in q06_new q06_timed l1_new q8_new; do echo "== $n"; grep -A8 "between step graphs" $L/$n.log; done
echo "== async wall ms a step (GPU replay in brackets): untimed / timed / untimed / timed"
aw() { grep -oE "GPU per step \(graph replay\) [0-9.]+|async scheduling: wall per step [0-9.]+" $L/$1.log | grep -oE "[0-9.]+$" | tr '\n' ' '; }
echo "q06 $(aw q06_new)| $(aw q06_timed)| $(aw q06_new2)| $(aw q06_timed2)"
echo "l1 $(aw l1_new)| $(aw l1_timed)"
echo "ALL DONE"
