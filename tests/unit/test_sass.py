"""kernels/sass.py: a precompiled cubin is found only for the exact PTX it was built from."""

from atlas.kernels.sass import SASS_DIR_ENV, find_sass, sass_name


def test_a_cubin_is_found_by_the_content_of_its_ptx(tmp_path):
    ptx = b".version 8.0\n.target sm_90a\n"
    (tmp_path / sass_name(ptx)).write_bytes(b"cubin-bytes")
    env = {SASS_DIR_ENV: str(tmp_path)}
    assert find_sass(ptx, env) == b"cubin-bytes"
    assert find_sass(ptx + b"\0", env) == b"cubin-bytes"  # the loader's NUL terminator
    assert find_sass(ptx + b"// edited\n", env) is None  # other source: JIT it
    assert find_sass(ptx, {}) is None  # no directory configured


def test_names_differ_for_different_ptx():
    assert sass_name(b"a") != sass_name(b"b")
    assert sass_name(b"a").endswith(".cubin") and len(sass_name(b"a")) == 64 + 6
