#!/usr/bin/env bash
# session-45 call H: which block ends the one-launch gated attention ~5.5 us after the median
# block (gpu160-162)? The phase trace of Qwen3.5-35B-A3B's heads at 538 keys (plain D-256 and
# gated), every block's stamps saved (--dump), then each launch's last-ending block's timeline
# against the median keyed block's (globaltimer us from the launch's first start).
# Prepare: as gpu163 (.device at this HEAD). Carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=0 t 200 trace python3 tools/gpu/trace_decode_attn.py --long --gated --heads qwen3.5-35b-a3b \
  --keys 538 --trace-only --dump $R/trace_blocks.npz
grep -E "^shape|qwen3.5" $L/trace.log | cut -c1-330
python3 - $R/trace_blocks.npz <<'PY'
import sys
import numpy as np
from atlas.runtime.ops.attention import TRACE_PHASES as P, TRACE_KEYED_WORD as K, TRACE_SM_WORD as SM
d = np.load(sys.argv[1])
for key in sorted(d.files):
    name, keys, mode, run = key.split("|")
    if run != "2" or mode not in ("alone", "graph"):
        continue
    t = d[key].astype(np.int64)
    ran = t[:, P.index("end")] > 0
    t0 = t[ran, 0].min()
    rel = lambda row, p: (row[P.index(p)] - t0) / 1e3 if row[P.index(p)] > 0 else float("nan")
    keyed = np.where(ran & (t[:, K] == 1))[0]
    last = int(np.argmax(np.where(ran, t[:, P.index("end")], 0)))
    med = keyed[np.argsort(t[keyed, P.index("end")])[len(keyed) // 2]]
    print(f"{name} {mode} keys {keys}: {len(keyed)} keyed of {int(ran.sum())} blocks; last block {last} "
          f"(keyed {int(t[last, K])}, SM {int(t[last, SM])}) vs median keyed block {med}")
    for b, tag in ((last, "last"), (med, "median")):
        print(f"  {tag:<6} " + " ".join(f"{p}={rel(t[b], p):.2f}" for p in P if p != "start")
              + f" start={rel(t[b], 'start'):.2f}")
    ends = np.sort((t[keyed, P.index("end")] - t0) / 1e3)
    print("  keyed ends (us):", " ".join(f"{e:.2f}" for e in ends))
PY
echo "ALL DONE"
