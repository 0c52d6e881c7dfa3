"""Progress lines: weight loading, and long steps as written to a log (not a terminal)."""

import io
import time

import pytest

from atlas_cli.load_progress import LoadProgress, conversion_progress, step


def test_non_tty_writes_only_the_final_line():
    out = io.StringIO()
    p = LoadProgress(out)
    p(1, 3, 100, 3_000_000_000, 0.5)
    p(2, 3, 200, 3_000_000_000, 0.6)
    p(3, 3, 3_000_000_000, 3_000_000_000, 1.5)
    assert out.getvalue() == "loading weights: 3/3 tensors, 3.00/3.00 GB, 2.00 GB/s\n"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tty_redraws_in_place_and_ends_the_line():
    out = _Tty()
    p = LoadProgress(out, interval_s=0.0)
    p(1, 2, 10**9, 2 * 10**9, 1.0)
    p(2, 2, 2 * 10**9, 2 * 10**9, 2.0)
    assert out.getvalue() == ("\rloading weights: 1/2 tensors, 1.00/2.00 GB, 1.00 GB/s"
                              "\rloading weights: 2/2 tensors, 2.00/2.00 GB, 1.00 GB/s\n")


def test_step_announces_beats_and_times_a_step():
    out = io.StringIO()
    with step("preflight", stream=out, heartbeat_s=0.05):
        deadline = time.monotonic() + 10
        while "still running" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = out.getvalue().splitlines()
    assert lines[0] == "preflight ..."
    assert any(line.startswith("preflight: still running") for line in lines[1:-1])
    assert lines[-1].startswith("preflight: done in ")


def test_step_shows_the_detail_it_is_given():
    out = io.StringIO()
    count = ["3/10 tensors"]
    with step("converting", stream=out, heartbeat_s=0.01, detail=lambda: count[0]):
        while "still running" not in out.getvalue():
            time.sleep(0.01)
        count[0] = "10/10 tensors"
    assert "3/10 tensors" in out.getvalue() or "10/10 tensors" in out.getvalue()
    assert out.getvalue().splitlines()[-1].endswith("(10/10 tensors)")


def test_step_reports_a_failure():
    out = io.StringIO()
    with pytest.raises(RuntimeError), step("graph capture", stream=out, heartbeat_s=10):
        raise RuntimeError("boom")
    assert out.getvalue().splitlines()[-1].startswith("graph capture: failed after ")


def test_conversion_progress_prints_the_final_count_and_heartbeats_only():
    out = io.StringIO()
    show = conversion_progress(stream=out, heartbeat_s=3600)
    for i in range(1, 101):
        show(i, 100)
    assert out.getvalue().splitlines() == [out.getvalue().splitlines()[-1]]
    assert "converted 100/100 tensors" in out.getvalue()


def test_default_stream_is_the_current_stderr(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    LoadProgress()(1, 1, 10**9, 10**9, 1.0)
    conversion_progress()(2, 2)
    with step("capture"):
        pass
    assert out.getvalue().splitlines() == [
        "loading weights: 1/1 tensors, 1.00/1.00 GB, 1.00 GB/s",
        "converting the model: converted 2/2 tensors (0.0 s)", "capture ...",
        out.getvalue().splitlines()[-1]]
    assert out.getvalue().splitlines()[-1].startswith("capture: done in ")
