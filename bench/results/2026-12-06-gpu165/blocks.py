"""Each traced launch's last-ending block against its median keyed block (run 2 of the
trace_decode_attn.py --dump file): every phase in globaltimer us from the launch's first
block start, then the keyed blocks' end times."""

import sys

import numpy as np

from atlas.runtime.ops.attention import TRACE_KEYED_WORD as K
from atlas.runtime.ops.attention import TRACE_PHASES as P
from atlas.runtime.ops.attention import TRACE_SM_WORD as SM

d = np.load(sys.argv[1])
for key in sorted(d.files):
    name, keys, mode, run = key.split("|")
    if run != "2" or mode not in ("alone", "graph"):
        continue
    t = d[key].astype(np.int64)
    ran = t[:, P.index("end")] > 0
    t0 = t[ran, 0].min()

    def rel(row: np.ndarray, p: str) -> float:
        return (row[P.index(p)] - t0) / 1e3 if row[P.index(p)] > 0 else float("nan")

    keyed = np.where(ran & (t[:, K] == 1))[0]
    last = int(np.argmax(np.where(ran, t[:, P.index("end")], 0)))
    med = keyed[np.argsort(t[keyed, P.index("end")])[len(keyed) // 2]]
    print(f"{name} {mode} keys {keys}: {len(keyed)} keyed of {int(ran.sum())} blocks; last block "
          f"{last} (keyed {int(t[last, K])}, SM {int(t[last, SM])}) vs median keyed block {med}")
    for b, tag in ((last, "last"), (med, "median")):
        print(f"  {tag:<6} " + " ".join(f"{p}={rel(t[b], p):.2f}" for p in P if p != "start")
              + f" start={rel(t[b], 'start'):.2f}")
    ends = np.sort((t[keyed, P.index("end")] - t0) / 1e3)
    print("  keyed ends (us):", " ".join(f"{e:.2f}" for e in ends))
