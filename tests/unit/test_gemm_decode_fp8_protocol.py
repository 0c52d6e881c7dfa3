"""A model of gemm_decode_fp8.cu's split-K push protocol, run under random interleavings.

Why: the kernel's cluster ranks exchange partial tiles through mbarriers only (inbox_full:
a rank's inbox holds every rank's partial of its batch rows; sent_ok: every rank has summed
out of its inbox), and a mistake there is a device hang that no host reference sees (gpu200:
a rank summing no batch row armed its inbox for 0 bytes, its phases ran two ahead of a
waiting warp, and parity named a phase not yet complete). The model keeps the kernel's order
of operations per consumer warp, an mbarrier's counts and its parity wait, and checks under
many schedules that no wait is ever two phases behind its barrier, that nothing deadlocks,
and that every rank sums exactly the partials of the tile it is on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

WARPS = 4  # consumer warps a block (one warpgroup)


class PhaseOverrun(AssertionError):
    """A parity wait on a barrier already two or more phases past the one it meant."""


@dataclass
class Mbarrier:
    """Arrival count and transaction bytes of one phase; `phase` counts completed phases."""

    count: int
    pending: int = field(init=False)
    tx: int = 0
    phase: int = 0

    def __post_init__(self) -> None:
        self.pending = self.count

    def _settle(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, tx: int = 0) -> None:  # arrive (expect_tx: with the phase's bytes)
        self.tx += tx
        self.pending -= 1
        self._settle()

    def complete_tx(self, nbytes: int) -> None:  # an st.async landing
        self.tx -= nbytes
        self._settle()

    def done(self, meant: int) -> bool:
        """try_wait.parity for phase `meant`: true once the barrier's current phase has the
        other parity, which names the right phase only while it is at most one ahead."""
        if self.phase > meant + 1 and self.phase % 2 == meant % 2:
            raise PhaseOverrun(f"waiting for phase {meant}, barrier at {self.phase}")
        return self.phase % 2 != meant % 2


def owner(t: int, m: int, split: int) -> int:
    """The rank whose batch rows [m o / S, m (o + 1) / S) hold row t (the kernel's loop)."""
    o = split - 1
    while m * o // split > t:
        o -= 1
    return o


def run(m: int, split: int, tiles: int, seed: int, guard_empty: bool = True) -> None:
    """Every consumer warp of every rank through `tiles` tiles in a random interleaving;
    guard_empty False: gpu200's form (ranks without rows arm and wait on empty phases)."""
    rows = [range(m * r // split, m * (r + 1) // split) for r in range(split)]
    per_warp = 16 * 4  # a warp's 16 rows of one batch row, f32
    inbox_bytes = [split * len(rows[r]) * WARPS * per_warp for r in range(split)]
    inbox_full = [Mbarrier(1) for _ in range(split)]
    sent_ok = [Mbarrier(split * WARPS) for _ in range(split)]
    inbox: list[dict[tuple[int, int, int], int]] = [{} for _ in range(split)]
    for r in range(split):  # thread 0 at the start
        if tiles > 0 and (inbox_bytes[r] > 0 or not guard_empty):
            inbox_full[r].arrive(inbox_bytes[r])

    def warp(r: int, w: int):
        for j in range(tiles):
            if j > 0:
                yield sent_ok[r], j - 1
            for t in range(m):  # push this warp's rows of each batch row to its summer
                o = owner(t, m, split)
                inbox[o][r, t, w] = j
                inbox_full[o].complete_tx(per_warp)
            more = j + 1 < tiles
            if inbox_bytes[r] > 0 or not guard_empty:
                yield inbox_full[r], j
                if w == 0 and more:
                    inbox_full[r].arrive(inbox_bytes[r])
            for p in range(split):  # the sums read every rank's partial of this rank's rows
                for t in rows[r]:
                    for q in range(WARPS):
                        assert inbox[r][p, t, q] == j, (r, j, p, t, q)
            if more:
                for p in range(split):
                    sent_ok[p].arrive()

    rng = random.Random(seed)
    agents = [warp(r, w) for r in range(split) for w in range(WARPS)]
    waits = {i: next(a, None) for i, a in enumerate(agents)}
    while any(v is not None for v in waits.values()):
        ready = [i for i, v in waits.items() if v is not None and v[0].done(v[1])]
        assert ready, f"deadlock: m {m}, split {split}, tiles {tiles}"
        i = rng.choice(ready)
        waits[i] = next(agents[i], None)


CONFIGS = [(m, s, t) for m in (1, 2, 3, 5, 8) for s in (2, 3, 4, 8) for t in (1, 2, 3, 5)]


@pytest.mark.parametrize("m,split,tiles", CONFIGS)
def test_push_protocol_holds_under_random_schedules(m: int, split: int, tiles: int) -> None:
    for seed in range(20):
        run(m, split, tiles, seed)


def test_the_model_finds_gpu200s_hang() -> None:
    """Ranks without batch rows on empty inbox phases (m 1, split 2, several tiles): some
    schedule leaves a warp waiting two phases behind."""
    with pytest.raises(PhaseOverrun):
        for seed in range(50):
            run(1, 2, 3, seed, guard_empty=False)
    run(1, 2, 1, 0, guard_empty=False)  # one tile: no re-arm, no overrun (gpu200's passes)
