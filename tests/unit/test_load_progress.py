"""The weight-loading progress line."""

import io

from atlas_cli.load_progress import LoadProgress


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
