"""The clustered decode attention's push merge (kernels/hopper/common/decode_attn.cuh
push_warp_partials, decode_push_merge; decode_merge.cuh PushPart), transliterated: every
merging block's mbarrier must expect exactly what the cluster's keyed blocks send it (a byte
or an arrival short and the block waits forever, one too many and it reads a partial before
it lands), and every element of every head must reach exactly one merging block, once from
each keyed warp. The device check cases run the kernel; this pins the bookkeeping on the host
for every head dim, head count and number of keyed blocks, which the cases cannot all cover.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from atlas.runtime.ops import attention

ROOT = Path(__file__).resolve().parents[2]
COMMON = ROOT / "kernels" / "hopper" / "common"
WARPS = 4  # kMergeWarps: warps of a decode block
RANKS = attention.DECODE_CLUSTER_SPLITS  # kPushRanks: blocks of a cluster


def _cuh_int(source: str, name: str) -> int:
    return int(re.search(rf"constexpr int {name} = (\w+);", source).group(1).rstrip("u"))


def expected(d: int, heads: int, keyed: int, rank: int) -> tuple[int, int]:
    """decode_attn's push_expect arguments for block `rank`: (local arrivals besides thread
    0's, bytes from peers)."""
    self_keyed = rank < keyed
    warp_bytes = heads * (4 * d // RANKS + 8)          # push_warp_bytes
    warp_arrivals = d // RANKS // 8 + 1                # push_warp_arrivals
    return (WARPS * warp_arrivals if self_keyed else 0,
            (keyed - (1 if self_keyed else 0)) * WARPS * warp_bytes)


def sends(d: int, heads: int, keyed: int):
    """What push_warp_partials does in each lane of each warp of the keyed blocks: yields
    (sender rank, receiver rank, slots, bytes), one per lane and kind (a lane sending to its
    own block stores the slots and arrives once), slots ("o", partial, head, element of the
    receiver's slice, head dim) or ("ml", partial, head)."""
    lanes_per_key, e = d // 8, d // RANKS
    for sender in range(keyed):
        for warp in range(WARPS):
            p = sender * WARPS + warp
            for lane in range(32):
                sub = lane % lanes_per_key
                if lane < lanes_per_key:
                    to, e0 = sub * 8 // e, sub * 8 % e
                    yield sender, to, [("o", p, g, e0 + i, sub * 8 + i) for g in range(heads)
                                       for i in range(8)], heads * 32
                if lane < RANKS:
                    yield sender, lane, [("ml", p, g) for g in range(heads)], heads * 8


@pytest.mark.parametrize("d", attention.HEAD_DIMS)
@pytest.mark.parametrize("heads", [1, 2, 3, 4])
@pytest.mark.parametrize("keyed", range(1, RANKS + 1))
def test_every_mbarrier_expects_what_it_is_sent(d: int, heads: int, keyed: int) -> None:
    e = d // RANKS
    got_bytes, got_arrivals = Counter(), Counter()
    slots: dict[int, Counter] = {r: Counter() for r in range(RANKS)}
    for sender, to, written, nbytes in sends(d, heads, keyed):
        for slot in written:
            if slot[0] == "o":
                assert slot[4] == to * e + slot[3]  # the receiver's element x is dim r E + x
            slots[to][slot[:4]] += 1
        if to == sender:
            got_arrivals[to] += 1
        else:
            got_bytes[to] += nbytes
    for rank in range(RANKS):
        assert (got_arrivals[rank], got_bytes[rank]) == expected(d, heads, keyed, rank), rank
        # every (partial, head, element) of the slice and every (partial, head) (m, l) once
        want = Counter({("o", p, g, x): 1 for p in range(keyed * WARPS) for g in range(heads)
                        for x in range(e)})
        want.update({("ml", p, g): 1 for p in range(keyed * WARPS) for g in range(heads)})
        assert slots[rank] == want


def test_push_part_constants_match_the_kernel() -> None:
    merge = (COMMON / "decode_merge.cuh").read_text()
    assert _cuh_int(merge, "kPushRanks") == RANKS
    assert _cuh_int(merge, "kMergeWarps") == WARPS
    assert _cuh_int(merge, "kMergeMaxDim") == max(attention.HEAD_DIMS)
    assert _cuh_int(merge, "kMergeHeads") == attention.DECODE_HEADS_PER_BLOCK
