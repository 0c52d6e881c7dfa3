"""A hybrid model's recurrent state as slots that can be copied: rollback and snapshots.

The Gated-DeltaNet layers keep, per sequence slot, a conv state and a delta-rule state that
each step updates in place; unlike the paged KV cache it cannot be cut back to an earlier
position. Everything that needs an earlier state therefore copies whole slots: a
speculative verification saves its sequence's slot before the forward and restores it when
a draft is rejected (the runner then recomputes the accepted tokens), and the prefix cache
keeps snapshots of the state at block boundaries in slots of their own. The pools hold
`num_slots` slots per layer, laid out [layer][slot] (see load.py); a copy moves one slot of
every layer, device to device on the step's stream.
"""

from __future__ import annotations

from dataclasses import dataclass

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
