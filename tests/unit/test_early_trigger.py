"""The launches that let the next kernel launch before their own PDL wait
(ops/early_trigger.py, atlas_common.cuh pdl_enter_early): the ATLAS_EARLY_TRIGGER switch,
the entry point each launch builder takes by kind and row count, and the early entries'
check cases against float64 on the host backend (the same values as the plain entries:
only the trigger moves)."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases.attention_long import long_decode_cases
from atlas.runtime.cases.gated_rmsnorm import attn_gate_cases
from atlas.runtime.cases.rmsnorm import rmsnorm_cases
from atlas.runtime.cases.silu_mul import silu_mul_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import LaunchRecord, MockGpuBackend
from atlas.runtime.ops import KernelCache, activation, attention, early_trigger, gating, norm
from atlas.runtime.ops.routes import EARLY_TRIGGER_KINDS, KernelRoutes

KINDS = frozenset(EARLY_TRIGGER_KINDS)


def test_the_switch_parses_a_set_of_kinds() -> None:
    assert KINDS == {"norm", "silu", "combine", "gate"}
    parse = lambda v: KernelRoutes.from_env({"ATLAS_EARLY_TRIGGER": v}).early_trigger  # noqa
    assert KernelRoutes.from_env({}).early_trigger is None
    assert parse("all") == KINDS and parse("ALL") == KINDS
    assert parse("none") == frozenset()
    assert parse("norm, silu") == {"norm", "silu"}
    with pytest.raises(ValueError, match="ATLAS_EARLY_TRIGGER.*unknown attention"):
        parse("norm,attention")


def _launch(kind: str, kc: KernelCache, dev: MockGpuBackend, rows: int) -> LaunchRecord:
    """The launch the `kind` launch builder makes for `rows` rows."""
    p = dev.alloc(2 * 8192 * max(rows, 1))
    if kind == "norm":
        norm.add_rmsnorm(kc, 0, p, p, p, p, rows, 2048, 1e-6, True)
    elif kind == "silu":
        activation.silu_mul(kc, 0, p, p, rows, 1536)
    elif kind == "combine":
        attention.combine_partials(kc, 0, p, p, p, p, rows, 32, 128, 4)
    else:
        gating.sigmoid_gate_mul(kc, 0, p, p, p, rows, 16, 256, 16 * 512 + 768, 512)
    (rec,) = dev.drain_launches()
    return rec


PLAIN = {"norm": "add_rmsnorm_offset_bf16", "silu": "silu_mul_bf16",
         "combine": "decode_attn_combine_bf16", "gate": "sigmoid_gate_mul_bf16"}
EARLY = {"norm": "add_rmsnorm_offset_early_bf16", "silu": "silu_mul_early_bf16",
         "combine": "decode_attn_combine_early_bf16", "gate": "sigmoid_gate_mul_early_bf16"}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("rows", [1, 2, 8, 64, 2048])
def test_unset_batched_rows_trigger_early_and_one_row_after_the_wait(kind: str,
                                                                     rows: int) -> None:
    """The rule: from EARLY_MIN_ROWS (2) rows on the early entry, one row the plain one."""
    assert early_trigger.EARLY_MIN_ROWS == 2
    dev = MockGpuBackend()
    func = _launch(kind, KernelCache(dev, KernelRoutes()), dev, rows).func
    assert func == (EARLY if rows >= 2 else PLAIN)[kind]


@pytest.mark.parametrize("forced", [frozenset(), frozenset({"norm"}), frozenset({"silu", "gate"}),
                                    KINDS])
@pytest.mark.parametrize("rows", [1, 8])
def test_a_forced_set_holds_at_every_row_count(forced: frozenset[str], rows: int) -> None:
    dev = MockGpuBackend()
    kc = KernelCache(dev, KernelRoutes(early_trigger=forced))
    for kind in sorted(KINDS):
        assert _launch(kind, kc, dev, rows).func == (EARLY if kind in forced else PLAIN)[kind]


def test_the_twins_take_the_same_arguments() -> None:
    """The same module, grid, block and arguments on either entry of each kind."""
    for kind in sorted(KINDS):
        recs = []
        for forced in (frozenset(), KINDS):
            dev = MockGpuBackend()
            recs.append(_launch(kind, KernelCache(dev, KernelRoutes(early_trigger=forced)),
                                dev, 4))
        plain, early = recs
        assert plain.func == PLAIN[kind] and early.func == EARLY[kind]
        assert (plain.module, plain.grid, plain.block, plain.args) == (
            early.module, early.grid, early.block, early.args), kind


def test_the_early_check_cases_match_float64() -> None:
    """Each early entry runs in its module's check cases (the default rule sends their
    multi-row launches to it; rmsnorm's also force it at one row) and matches float64 there;
    the host backend runs an entry only through a reference registered for it."""
    rng = np.random.default_rng(5)
    norms = [c for c in rmsnorm_cases(rng) if "early" in c.name]
    silu = [c for c in silu_mul_cases(rng)
            if c.name.startswith("silu_mul") and c.name != "silu_mul_1x8"]
    gates = [c for c in attn_gate_cases(rng) if not c.name.startswith("attn_gate_t1_")]
    combined = [c for c in long_decode_cases(rng) if c.name == "long D128 gqa4 bs16 splits3"]
    # the plain and offset norms' three, and gpt-oss's one-rounding one
    assert len(norms) == 4 and all(c.name.startswith("add_rmsnorm") for c in norms)
    assert len(silu) == 3 and len(gates) == 2 and len(combined) == 1
    for c in norms + silu + gates + combined:
        result = check(HostBackend(), c)
        assert result.passed, (c.name, result.detail)


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("rows", [1, 8])
def test_the_late_norm_takes_the_rows_that_do_not_trigger_early(offset: bool, rows: int) -> None:
    """ATLAS_NORM_LATE sends the add + norms that trigger after their wait (one row, unless
    ATLAS_EARLY_TRIGGER forces them) to the *_late_* entries, with the same launch; the early
    rule keeps the batched rows."""
    assert KernelRoutes.from_env({"ATLAS_NORM_LATE": "1"}).norm_late
    assert not KernelRoutes.from_env({}).norm_late
    recs = []
    for late in (False, True):
        dev = MockGpuBackend()
        p = dev.alloc(2 * 8192 * rows)
        norm.add_rmsnorm(KernelCache(dev, KernelRoutes(norm_late=late)), 0, p, p, p, p, rows,
                         2048, 1e-6, offset)
        recs += dev.drain_launches()
    plain, late_rec = recs
    stem = "add_rmsnorm_offset" if offset else "add_rmsnorm"
    if rows >= early_trigger.EARLY_MIN_ROWS:
        assert plain.func == late_rec.func == f"{stem}_early_bf16"
    else:
        assert (plain.func, late_rec.func) == (f"{stem}_bf16", f"{stem}_late_bf16")
    assert (plain.module, plain.grid, plain.block, plain.args) == (
        late_rec.module, late_rec.grid, late_rec.block, late_rec.args)


def test_the_late_check_cases_match_float64() -> None:
    """The late entries (plain and offset weights, a width past one vector a thread) in the
    rmsnorm check cases match float64 on the host backend, which runs an entry only through
    a reference registered for it."""
    cases = [c for c in rmsnorm_cases(np.random.default_rng(6))
             if "_late_" in c.name and c.name.startswith("add_")]
    assert len(cases) == 3 and any("offset" in c.name for c in cases)
    for c in cases:
        result = check(HostBackend(), c)
        assert result.passed, (c.name, result.detail)
