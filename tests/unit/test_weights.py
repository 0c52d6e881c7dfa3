"""WeightStore: header parsing, validation before upload, and the three read paths."""

import errno
import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from atlas.core.dtype import DType
from atlas.runtime import weights
from atlas.runtime.gpu import GpuBackend
from atlas.runtime.weights import WeightError, WeightStore, write_safetensors


class RamBackend(GpuBackend):
    """Device memory as one bytearray per allocation; pointers are base + offset."""

    name = "ram"

    def __init__(self) -> None:
        self.mem: dict[int, bytearray] = {}
        self.next = 1 << 20
        self.pinned: list[int] = []

    def alloc(self, nbytes):
        ptr = self.next
        self.mem[ptr] = bytearray(nbytes)
        self.next += (nbytes + 0xFFFF) & ~0xFFF
        return ptr

    def _find(self, ptr, n):
        for base, buf in self.mem.items():
            if base <= ptr and ptr + n <= base + len(buf):
                return buf, ptr - base
        raise AssertionError(f"bad device range {ptr:#x}+{n}")

    def copy_h2d(self, dst, src, stream=None):
        data = np.ascontiguousarray(src).view(np.uint8).reshape(-1)
        buf, off = self._find(dst, data.nbytes)
        buf[off:off + data.nbytes] = data.tobytes()

    def copy_d2h(self, dst, src, stream=None):
        buf, off = self._find(src, dst.nbytes)
        dst.reshape(-1).view(np.uint8)[:] = np.frombuffer(bytes(buf[off:off + dst.nbytes]),
                                                          dtype=np.uint8)

    def alloc_host_pinned(self, nbytes):
        self.pinned.append(nbytes)
        return np.empty(nbytes, dtype=np.uint8)

    def copy_d2d(self, dst, src, nbytes, stream=None): raise AssertionError
    def memset(self, ptr, value, nbytes, stream=None): raise AssertionError
    def total_memory(self): return 1 << 30
    def free_memory(self): return 1 << 30
    def free(self, ptr): del self.mem[ptr]
    def kernel(self, module, func): raise AssertionError
    def launch(self, *a): raise AssertionError
    def synchronize(self, stream=None): pass


def _tensors(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "model.embed_tokens.weight": rng.standard_normal((64, 48)).astype(np.float32),
        "model.norm.weight": rng.standard_normal(48).astype(np.float16),
        "odd": rng.integers(0, 255, 4097, dtype=np.uint8),  # unaligned size
        "ids": rng.integers(-5, 5, (3, 7), dtype=np.int32),
    }


@pytest.fixture
def single(tmp_path):
    t = _tensors()
    save_file(t, str(tmp_path / "model.safetensors"))
    return tmp_path, t


def _download(backend, report, store, name):
    info = store.info(name)
    out = np.empty(info.nbytes, dtype=np.uint8)
    backend.copy_d2h(out, report.ptrs[name])
    return out


def test_header_listing_and_read(single):
    path, t = single
    store = WeightStore(path)
    assert len(store) == 4 and "odd" in store
    info = store.info("model.embed_tokens.weight")
    assert info.dtype == "F32" and info.shape == (64, 48) and info.nbytes == 64 * 48 * 4
    for name, arr in t.items():
        np.testing.assert_array_equal(store.read(name), arr)


def test_sharded_index(tmp_path):
    t = _tensors()
    names = sorted(t)
    save_file({n: t[n] for n in names[:2]}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({n: t[n] for n in names[2:]}, str(tmp_path / "model-00002-of-00002.safetensors"))
    wm = {n: f"model-0000{1 + (i >= 2)}-of-00002.safetensors" for i, n in enumerate(names)}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    store = WeightStore(tmp_path)
    assert {store.info(n).file.name for n in names} == set(wm.values())
    backend = RamBackend()
    report = store.upload(backend)
    for n in names:
        np.testing.assert_array_equal(_download(backend, report, store, n),
                                      t[n].reshape(-1).view(np.uint8))


def test_index_naming_a_missing_tensor_or_bad_file(tmp_path):
    save_file(_tensors(), str(tmp_path / "a.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"ghost": "a.safetensors"}}))
    with pytest.raises(WeightError, match="'ghost'"):
        WeightStore(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"odd": "../a.safetensors"}}))
    with pytest.raises(WeightError, match="bad file name"):
        WeightStore(tmp_path)


def test_validate_names_each_bad_tensor(single):
    store = WeightStore(single[0])
    extra = store.validate({"model.embed_tokens.weight": (DType.FP32, (64, 48)),
                            "model.norm.weight": ("float16", [48])})
    assert extra == ["ids", "odd"]
    with pytest.raises(WeightError) as err:
        store.validate({"model.embed_tokens.weight": (DType.BF16, (64, 48)),
                        "model.norm.weight": (DType.FP16, (49,)),
                        "lm_head.weight": (DType.BF16, (64, 48))})
    msg = str(err.value)
    assert "'model.embed_tokens.weight': dtype F32, want BF16" in msg
    assert "'model.norm.weight': shape [48], want [49]" in msg
    assert "missing tensor 'lm_head.weight'" in msg
    with pytest.raises(WeightError, match="e2m1 has no safetensors dtype"):
        store.validate({"odd": (DType.E2M1, (4097,))})


def _raw_file(path, header, data_len):
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data_len))


@pytest.mark.parametrize("header,data_len,match", [
    ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, 8, "outside the data"),
    ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, 16, "needs 16"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 16, "overlap"),
    ({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}}, 8, "unknown dtype"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, 8, "bad shape"),
])
def test_header_sanity_errors_name_the_file(tmp_path, header, data_len, match):
    f = tmp_path / "model.safetensors"
    _raw_file(f, header, data_len)
    with pytest.raises(WeightError, match=match) as err:
        WeightStore(tmp_path)
    assert str(f) in str(err.value)


def test_header_length_beyond_file(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(WeightError, match="exceeds the file"):
        WeightStore(tmp_path)


def _upload_all(path, **kw):
    store = WeightStore(path)
    backend = RamBackend()
    calls = []
    report = store.upload(backend, progress=lambda *a: calls.append(a), **kw)
    return store, backend, report, calls


@pytest.mark.parametrize("chunk", [4096, 8192, 1 << 20])
def test_direct_path_bytes_and_progress(single, chunk):
    path, t = single
    store, backend, report, calls = _upload_all(path, chunk_bytes=chunk)
    assert report.modes == {"model.safetensors": "direct"}
    assert len(backend.pinned) == 2  # two staging buffers, reused for every read
    assert max(backend.pinned) <= min(chunk, 1 << 15) + 3 * 4096  # no bigger than a read
    for name, arr in t.items():
        np.testing.assert_array_equal(_download(backend, report, store, name),
                                      arr.reshape(-1).view(np.uint8))
    total = sum(a.nbytes for a in t.values())
    assert calls[-1][:4] == (4, 4, total, total) and report.nbytes == total
    assert [c[2] for c in calls] == sorted(c[2] for c in calls)  # bytes only grow
    # one progress call per read: big chunks coalesce all four tensors, small ones split
    assert len(calls) == 1 if chunk == 1 << 20 else len(calls) >= total // chunk


def test_mmap_fallback_matches_direct_on_einval(single, monkeypatch):
    path, t = single
    store, backend, direct, _ = _upload_all(path)

    def refuse(fd, buf, offset):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(weights, "_pread_into", refuse)
    store2, backend2, fallback, calls = _upload_all(path)
    assert fallback.modes == {"model.safetensors": "mmap"}
    assert calls[-1][0] == 4
    for name in t:
        np.testing.assert_array_equal(_download(backend, direct, store, name),
                                      _download(backend2, fallback, store2, name))


def test_open_refusing_o_direct_falls_back(single, monkeypatch):
    path, t = single

    def refuse(p):
        raise OSError(errno.EINVAL, "O_DIRECT unsupported")

    monkeypatch.setattr(weights, "_open_direct", refuse)
    store, backend, report, _ = _upload_all(path)
    assert report.modes == {"model.safetensors": "mmap"}
    np.testing.assert_array_equal(_download(backend, report, store, "odd"), t["odd"])


def test_forced_mmap_and_buffered_for_many_tensors(single, monkeypatch):
    path, t = single
    store, backend, report, _ = _upload_all(path, fast=False)
    assert report.modes == {"model.safetensors": "mmap"}
    monkeypatch.setattr(weights, "BUFFERED_TENSOR_THRESHOLD", 2)
    store, backend, report, _ = _upload_all(path)
    assert report.modes == {"model.safetensors": "buffered"}
    np.testing.assert_array_equal(_download(backend, report, store, "ids"),
                                  t["ids"].reshape(-1).view(np.uint8))


def test_other_read_errors_propagate(single, monkeypatch):
    def broken(fd, buf, offset):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(weights, "_pread_into", broken)
    with pytest.raises(OSError, match="I/O error"):
        _upload_all(single[0])


def test_upload_into_given_destinations(single):
    path, t = single
    store = WeightStore(path)
    backend = RamBackend()
    base = backend.alloc(1 << 16)
    dst = {"odd": base + 100, "ids": base + 8192}
    report = store.upload(backend, names=["odd", "ids"], dst=dst)
    assert report.ptrs == dst
    np.testing.assert_array_equal(backend.download(base + 100, np.uint8, 4097), t["odd"])
    np.testing.assert_array_equal(backend.download(base + 8192, np.int32, (3, 7)), t["ids"])
    carve = iter([base + 20000, base + 40000])
    report = store.upload(backend, names=["ids", "odd"], dst=lambda info: next(carve))
    assert report.ptrs == {"ids": base + 20000, "odd": base + 40000}
    np.testing.assert_array_equal(backend.download(base + 40000, np.uint8, 4097), t["odd"])
    with pytest.raises(WeightError, match="no destination for tensor 'odd'"):
        store.upload(backend, names=["odd"], dst={})


def test_write_safetensors_round_trips_through_safetensors_package(tmp_path):
    from safetensors.numpy import load_file

    t = _tensors(1)
    bf16 = np.arange(12, dtype=np.uint16).reshape(3, 4)
    layout = [(n, {"float32": "F32", "float16": "F16", "uint8": "U8", "int32": "I32"}[
        str(a.dtype)], a.shape) for n, a in t.items()]
    write_safetensors(tmp_path / "x.safetensors", layout, iter(t.values()))
    back = load_file(str(tmp_path / "x.safetensors"))
    for n, a in t.items():
        np.testing.assert_array_equal(back[n], a)
    write_safetensors(tmp_path / "model.safetensors", [("w", "BF16", (3, 4))], [bf16])
    store = WeightStore(tmp_path)
    assert store.info("w").dtype == "BF16"
    np.testing.assert_array_equal(store.read("w"), bf16)
    with pytest.raises(WeightError, match="'w'"):
        write_safetensors(tmp_path / "y.safetensors", [("w", "BF16", (3, 5))], [bf16])
