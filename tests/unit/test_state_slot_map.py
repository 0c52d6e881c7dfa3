"""StateSlotMap: where each sequence's recurrent state lives when a speculating hybrid runner
keeps each verification token's state in a slot of its own (model/state_pools.py)."""

from __future__ import annotations

import pytest

from atlas.model.state_pools import StateSlotMap


def test_a_sequence_moves_to_its_accepted_prefix_s_slot_and_reuses_the_rest():
    m = StateSlotMap(first=5, num_draft_tokens=3)          # 4 sequences + padding before it
    assert m.group(1) == [1, 9, 10, 11, 12] and m.current(1) == 1
    outs = m.outs(1, 4)
    assert outs == [9, 10, 11, 12]
    m.keep(1, outs[1])                                     # two tokens kept
    assert m.current(1) == 10
    assert m.outs(1, 4) == [1, 9, 11, 12]                  # never the slot it reads
    assert m.outs(1, 2) == [1, 9]
    assert m.current(0) == 0 and m.outs(0, 1) == [5]       # groups do not overlap
    m.reset(1)                                             # a new sequence in sampler slot 1
    assert m.current(1) == 1


def test_it_refuses_slots_outside_a_sequence_s_group():
    m = StateSlotMap(first=3, num_draft_tokens=1)
    with pytest.raises(ValueError, match="not sampler slot 0's"):
        m.keep(0, 5)
    with pytest.raises(ValueError, match="exceeds"):
        m.outs(0, 3)
