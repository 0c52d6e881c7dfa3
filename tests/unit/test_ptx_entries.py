"""The PTX scan that decides which kernels are launched with programmatic dependent launch."""

from atlas.kernels.ptx_entries import entries_without_pdl, entry_bodies, pdl_entries

PTX = """
.version 8.8
.target sm_90a
.visible .entry waits(
  .param .u64 p
)
{
  griddepcontrol.wait;
  ret;
}
.func (.param .b32 r) helper(
  .param .b32 x
)
{
  griddepcontrol.wait;
  ret;
}
.visible .entry plain(
  .param .u64 p
)
{
  ret;
}
.entry waits_late()
{
  ld.global.u32 %r1, [%rd1];
  griddepcontrol.wait;
  ret;
}
"""


def test_entry_bodies_stop_at_the_next_function():
    bodies = entry_bodies(PTX)
    assert sorted(bodies) == ["plain", "waits", "waits_late"]
    assert b"helper" not in bodies["waits"] and b"griddepcontrol" not in bodies["plain"]


def test_only_entries_whose_own_body_waits_opt_in():
    # `plain` follows a .func that waits: the wait is not its own
    assert pdl_entries(PTX) == frozenset({"waits", "waits_late"})
    assert pdl_entries(PTX.encode()) == pdl_entries(PTX)
    assert entries_without_pdl(PTX) == ["plain"]


CALLS = """
.func work(
  .param .align 8 .b8 work_param_0[16]
)
;
.visible .entry calls_worker(
  .param .u64 p
)
{
  call.uni
  work,
  (
  param0
  );
  ret;
}
.func (.param .b32 r) outer(
  .param .b32 x
)
{
  call.uni (retval0), work, (param0);
  ret;
}
.visible .entry calls_twice_removed()
{
  call.uni (retval0), outer, (param0);
  ret;
}
.visible .entry calls_nothing_that_waits()
{
  call.uni (retval0), idle, (param0);
  ret;
}
.func idle()
{
  ret;
}
.func work(
  .param .align 8 .b8 work_param_0[16]
)
{
  ld.global.nc.u32 %r1, [%rd1];
  griddepcontrol.wait;
  ret;
}
"""


def test_a_wait_in_a_called_function_counts():
    # a __noinline__ device function holding the kernel's work: declared first, defined last,
    # reached directly or through another function
    assert pdl_entries(CALLS) == frozenset({"calls_worker", "calls_twice_removed"})
    assert entries_without_pdl(CALLS) == ["calls_nothing_that_waits"]
    assert sorted(entry_bodies(CALLS)) == ["calls_nothing_that_waits", "calls_twice_removed",
                                           "calls_worker"]
