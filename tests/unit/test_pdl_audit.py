"""tools/gpu/pdl_audit.py: an entry whose SASS reads non-coherently before its PDL wait more
than its PTX does is reported (the shape of add_rmsnorm's late entries before their delta
was read through L2); weight loads the PTX itself puts before the wait, entries without a
wait and loads after it are not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "pdl_audit.py"
spec = importlib.util.spec_from_file_location("pdl_audit", SCRIPT)
audit = importlib.util.module_from_spec(spec)
sys.modules["pdl_audit"] = audit  # its dataclass looks its module up there
spec.loader.exec_module(audit)

PTX = """
.visible .entry hoisted(
	.param .u64 hoisted_param_0
)
{
	prefetch.global.L1 [%rd9];
	griddepcontrol.wait;
	ld.global.v4.u32 	{%r1, %r2, %r3, %r4}, [%rd20];
	ld.global.nc.v4.u32 	{%r5, %r6, %r7, %r8}, [%rd30];
	ret;
}
.visible .entry weights_first(
	.param .u64 weights_first_param_0
)
{
	ld.global.nc.v4.u32 	{%r5, %r6, %r7, %r8}, [%rd30];
	griddepcontrol.wait;
	griddepcontrol.launch_dependents;
	ld.global.nc.v4.u32 	{%r9, %r10, %r11, %r12}, [%rd31];
	ret;
}
.visible .entry no_wait(
	.param .u64 no_wait_param_0
)
{
	ld.global.nc.v4.u32 	{%r5, %r6, %r7, %r8}, [%rd30];
	ret;
}
"""

SASS = """
	code for sm_90a
		Function : hoisted
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*01f0*/              @!P0 LDG.E.128.CONSTANT R28, desc[UR12][R44.64] ;
        /*0200*/              @!P0 CCTL.E.PF1 [R38] ;
        /*0320*/                   ACQBULK ;
        /*0350*/              @!P0 LDG.E.128 R4, desc[UR12][R42.64] ;
        /*0360*/                   EXIT ;
		Function : weights_first
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0010*/                   LDG.E.128.CONSTANT R28, desc[UR12][R44.64] ;
        /*0020*/                   ACQBULK ;
        /*0030*/                   PREEXIT ;
        /*0040*/                   LDG.E.128.CONSTANT R24, desc[UR12][R46.64] ;
        /*0050*/                   EXIT ;
		Function : no_wait
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0010*/                   LDG.E.128.CONSTANT R28, desc[UR12][R44.64] ;
        /*0020*/                   EXIT ;
"""


def test_counts_before_the_first_wait() -> None:
    assert audit.ptx_loads_before_wait(PTX) == {"hoisted": 0, "weights_first": 1}
    assert audit.sass_loads_before_wait(SASS) == {"hoisted": 1, "weights_first": 1}


def test_only_the_hoisted_entry_is_reported() -> None:
    assert audit.hoists("rmsnorm", PTX, SASS) == [audit.Hoist("rmsnorm", "hoisted", 0, 1)]


def test_a_schedule_that_keeps_the_order_is_clean() -> None:
    hoisted = "/*01f0*/              @!P0 LDG.E.128.CONSTANT R28, desc[UR12][R44.64] ;"
    assert hoisted in SASS
    kept = SASS.replace(hoisted, "/*01f0*/              NOP ;").replace(
        "@!P0 LDG.E.128 R4,", "@!P0 LDG.E.128.CONSTANT R4,")
    assert audit.sass_loads_before_wait(kept)["hoisted"] == 0
    assert audit.hoists("rmsnorm", PTX, kept) == []
