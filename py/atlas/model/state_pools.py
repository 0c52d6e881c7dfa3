"""A hybrid model's recurrent state as slots that can be copied: rollback and snapshots.

The Gated-DeltaNet layers keep, per sequence slot, a conv state and a delta-rule state that
each step updates in place; unlike the paged KV cache it cannot be cut back to an earlier
position. A speculative verification therefore leaves the state after each of its tokens
in a slot of its own and the sequence moves to the accepted prefix's (StateSlotMap), and
the prefix cache keeps snapshots of the state at block boundaries in slots of their own,
copied whole. The pools hold
`num_slots` slots per layer, laid out [layer][slot] (see load.py); a copy moves one slot of
every layer, device to device on the step's stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.config import LinearAttentionConfig
from ..runtime.gpu import GpuBackend, Stream
from .gated_deltanet import GatedDeltaNetWeights, conv_state_bytes, delta_state_bytes


@dataclass(frozen=True, slots=True)
class RecurrentStatePools:
    """Slot-level copies over every linear-attention layer's state pools."""

    backend: GpuBackend
    layers: tuple[GatedDeltaNetWeights, ...]
    la: LinearAttentionConfig
    num_slots: int

    @property
    def slot_bytes(self) -> int:
        """Device bytes of one slot across all layers (what a snapshot costs)."""
        return len(self.layers) * (conv_state_bytes(self.la) + delta_state_bytes(self.la))

    def copy(self, dst: int, src: int, stream: Stream | None = None) -> None:
        """Make slot `dst` hold slot `src`'s state, in every layer."""
        for slot in (dst, src):
            if not 0 <= slot < self.num_slots:
                raise ValueError(f"state slot {slot} outside 0..{self.num_slots - 1}")
        if dst == src:
            return
        conv, delta = conv_state_bytes(self.la), delta_state_bytes(self.la)
        for w in self.layers:
            self.backend.copy_d2d(w.conv_state + dst * conv, w.conv_state + src * conv, conv,
                                  stream)
            self.backend.copy_d2d(w.delta_state + dst * delta, w.delta_state + src * delta,
                                  delta, stream)


    def read(self, slot: int) -> np.ndarray:
        """Slot `slot`'s state in every layer (conv ring, then delta state), as bytes."""
        conv, delta = conv_state_bytes(self.la), delta_state_bytes(self.la)
        return np.concatenate([np.concatenate([
            self.backend.download(w.conv_state + slot * conv, np.uint8, (conv,)),
            self.backend.download(w.delta_state + slot * delta, np.uint8, (delta,))])
            for w in self.layers])


class StateSlotMap:
    """Which recurrent-state slot holds each sequence's state, with speculation.

    A verification runs a sequence's K + 1 tokens through the decode kernel token by token
    and leaves the state after token j in an out slot of its own (gdn_decode.cu): the
    sequence then keeps the slot of its accepted prefix and the rest become its next out
    slots, so a rejected draft costs no copy and no recompute. Sampler slot s owns the
    group {s} + K + 1 slots from `first` on; one of the group holds the state, the others
    are the out slots. Pure bookkeeping: no device access."""

    def __init__(self, first: int, num_draft_tokens: int) -> None:
        self.first = first
        self.width = num_draft_tokens + 1
        self._current: dict[int, int] = {}

    def group(self, slot: int) -> list[int]:
        """The state slots sampler slot `slot` owns."""
        base = self.first + slot * self.width
        return [slot] + list(range(base, base + self.width))

    def current(self, slot: int) -> int:
        """The state slot holding sampler slot `slot`'s sequence's state."""
        return self._current.get(slot, slot)

    def outs(self, slot: int, n: int) -> list[int]:
        """Where a verification of n <= K + 1 tokens leaves the state after each."""
        if n > self.width:
            raise ValueError(f"a verification of {n} tokens exceeds the {self.width} out "
                             "slots of its sequence")
        cur = self.current(slot)
        return [s for s in self.group(slot) if s != cur][:n]

    def keep(self, slot: int, state_slot: int) -> None:
        """The sequence's state is now in `state_slot` (one of its group)."""
        if state_slot not in self.group(slot):
            raise ValueError(f"state slot {state_slot} is not sampler slot {slot}'s")
        self._current[slot] = state_slot

    def reset(self, slot: int) -> None:
        """A new sequence in sampler slot `slot` starts in the slot itself."""
        self._current.pop(slot, None)
