"""The core vocabulary: DType sizes and names, Vendor, KernelTarget, SamplingParams."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from atlas.core.dtype import DType
from atlas.core.sampling import GREEDY, MAX_LOGIT_BIAS, SamplingParams
from atlas.core.target import KernelTarget
from atlas.core.vendor import Vendor

# --------------------------------------------------------------------------------------
# DType
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, bits", [
    (DType.E2M1, 4), (DType.FP8E4M3, 8), (DType.FP8E5M2, 8), (DType.U8, 8),
    (DType.BF16, 16), (DType.FP16, 16), (DType.FP32, 32), (DType.I32, 32)])
def test_dtype_bits(dtype: DType, bits: int) -> None:
    assert dtype.bits == bits
    assert dtype.nbytes(1024) == 1024 * bits // 8


@pytest.mark.parametrize("count, nbytes", [(0, 0), (1, 1), (2, 1), (3, 2), (16, 8), (17, 9)])
def test_e2m1_nbytes_rounds_a_half_byte_tail_up(count: int, nbytes: int) -> None:
    assert DType.E2M1.nbytes(count) == nbytes


def test_nbytes_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="-1"):
        DType.BF16.nbytes(-1)


@pytest.mark.parametrize("text, dtype", [
    ("bf16", DType.BF16), ("BF16", DType.BF16), ("bfloat16", DType.BF16), (" bf16 ", DType.BF16),
    ("F16", DType.FP16), ("float16", DType.FP16), ("half", DType.FP16),
    ("F32", DType.FP32), ("float32", DType.FP32), ("float", DType.FP32),
    ("I32", DType.I32), ("int32", DType.I32), ("U8", DType.U8), ("uint8", DType.U8),
    ("F8_E4M3", DType.FP8E4M3), ("float8_e4m3fn", DType.FP8E4M3), ("fp8e4m3", DType.FP8E4M3),
    ("F8_E5M2", DType.FP8E5M2), ("float8_e5m2", DType.FP8E5M2), ("e2m1", DType.E2M1)])
def test_dtype_parse_accepts_labels_and_safetensors_and_torch_names(text: str,
                                                                   dtype: DType) -> None:
    assert DType.parse(text) is dtype


def test_every_dtype_label_round_trips() -> None:
    labels = [d.label for d in DType]
    assert len(set(labels)) == len(labels)
    for d in DType:
        assert DType.parse(d.label) is d


@pytest.mark.parametrize("text", ["", "bf17", "F64", "int8", "float8"])
def test_dtype_parse_error_names_the_input_and_the_known_labels(text: str) -> None:
    with pytest.raises(ValueError) as err:
        DType.parse(text)
    assert repr(text) in str(err.value) and "bf16" in str(err.value)


# --------------------------------------------------------------------------------------
# Vendor
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, vendor", [
    ("nvidia", Vendor.NVIDIA), ("NVIDIA", Vendor.NVIDIA), (" amd\n", Vendor.AMD),
    ("Apple", Vendor.APPLE), ("intel", Vendor.INTEL)])
def test_vendor_parse(text: str, vendor: Vendor) -> None:
    assert Vendor.parse(text) is vendor


def test_vendor_parse_error_lists_known_vendors() -> None:
    with pytest.raises(ValueError) as err:
        Vendor.parse("qualcomm")
    message = str(err.value)
    assert "'qualcomm'" in message
    assert all(v.value in message for v in Vendor)
    assert err.value.__suppress_context__  # no chained enum traceback for users


# --------------------------------------------------------------------------------------
# KernelTarget
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["hopper/qwen3-8b/bf16", "/hopper/qwen3-8b/bf16/",
                                  " hopper/qwen3-8b/bf16\n"])
def test_kernel_target_parse(text: str) -> None:
    target = KernelTarget.parse(text)
    assert (target.hw, target.model, target.quant) == ("hopper", "qwen3-8b", "bf16")
    assert str(target) == target.name == "hopper/qwen3-8b/bf16"
    assert KernelTarget.parse(str(target)) == target


@pytest.mark.parametrize("text", ["", "hopper", "hopper/qwen3", "hopper//bf16",
                                  "a/b/c/d", "hopper/qwen3-8b/"])
def test_kernel_target_parse_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match="hw/model/quant"):
        KernelTarget.parse(text)


def test_kernel_target_is_a_frozen_hashable_key() -> None:
    a = KernelTarget("hopper", "qwen3", "bf16")
    assert {a: 1}[KernelTarget("hopper", "qwen3", "bf16")] == 1
    assert a != KernelTarget("gb10", "qwen3", "bf16")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.hw = "gb10"  # type: ignore[misc]


# --------------------------------------------------------------------------------------
# SamplingParams
# --------------------------------------------------------------------------------------


def test_defaults_are_valid_and_neutral() -> None:
    p = SamplingParams()
    p.validate()
    assert not p.is_greedy and not p.has_penalties
    assert GREEDY.is_greedy and GREEDY.temperature == 0.0


@pytest.mark.parametrize("field, value", [
    ("temperature", -0.1), ("top_p", 0.0), ("top_p", 1.01), ("top_k", -1),
    ("min_p", -0.01), ("min_p", 1.5), ("repetition_penalty", -1.0),
    ("presence_penalty", 2.5), ("presence_penalty", -2.01),
    ("frequency_penalty", 2.01), ("frequency_penalty", -3.0)])
def test_validate_names_the_out_of_range_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"^{field}="):
        SamplingParams(**{field: value}).validate()


@pytest.mark.parametrize("field", ["temperature", "top_p", "min_p", "repetition_penalty",
                                   "presence_penalty", "frequency_penalty"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_validate_rejects_non_finite_floats(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"^{field}="):
        SamplingParams(**{field: value}).validate()


@pytest.mark.parametrize("field, value", [
    ("temperature", 0.0), ("temperature", 2.0), ("top_p", 1e-6), ("top_p", 1.0),
    ("top_k", 0), ("top_k", 50), ("min_p", 0.0), ("min_p", 1.0),
    ("presence_penalty", -2.0), ("presence_penalty", 2.0), ("frequency_penalty", 2.0)])
def test_validate_accepts_range_edges(field: str, value: float) -> None:
    SamplingParams(**{field: value}).validate()


def test_repetition_penalty_zero_is_treated_as_neutral() -> None:
    """Dividing logits by a zero penalty would give inf/NaN, so 0 means 'off'."""
    p = SamplingParams(repetition_penalty=0.0)
    p.validate()
    assert p.effective_repetition_penalty == 1.0
    assert not p.has_penalties


@pytest.mark.parametrize("kwargs", [{"repetition_penalty": 1.1}, {"repetition_penalty": 0.5},
                                    {"presence_penalty": 0.1}, {"frequency_penalty": -0.1}])
def test_non_neutral_penalties_are_reported(kwargs: dict[str, float]) -> None:
    p = SamplingParams(**kwargs)
    assert p.has_penalties
    assert p.effective_repetition_penalty == kwargs.get("repetition_penalty", 1.0)


def test_greedy_means_non_positive_temperature() -> None:
    assert SamplingParams(temperature=0.0).is_greedy
    assert not SamplingParams(temperature=1e-3).is_greedy


def test_logit_bias_is_normalized_to_sorted_hashable_pairs() -> None:
    """A mapping or a list of lists (a JSON round trip of a preset) becomes the sorted tuple
    of (int, float) pairs, so params stay hashable and compare equal whatever the input."""
    want = ((3, -2.5), (7, 5.0))
    for given in ({7: 5, 3: -2.5}, [[7, 5.0], [3, -2.5]], ((3, -2.5), (7, 5))):
        p = SamplingParams(logit_bias=given)
        assert p.logit_bias == want and all(type(b) is float for _, b in p.logit_bias)
        assert p.logit_bias and hash(p) == hash(SamplingParams(logit_bias=want))
    assert SamplingParams(logit_bias=[]).logit_bias == () and not GREEDY.logit_bias
    p = SamplingParams(temperature=0.5, logit_bias={9: 1.5})
    assert SamplingParams(**json.loads(json.dumps(dataclasses.asdict(p)))) == p


@pytest.mark.parametrize("bias, message", [
    ({5: 150.0}, "logit_bias\\[5\\]=150.0 is not a finite number in \\[-100, 100\\]"),
    ({5: -100.5}, "logit_bias\\[5\\]"), ({5: math.nan}, "logit_bias\\[5\\]"),
    ({5: math.inf}, "logit_bias\\[5\\]"), ({-1: 1.0}, "logit_bias token -1"),
    ([(4, 1.0), (4, 2.0)], "logit_bias token 4 .* listed once"),
    ({t: 1.0 for t in range(MAX_LOGIT_BIAS + 1)}, f"at most {MAX_LOGIT_BIAS}")])
def test_validate_rejects_bad_logit_bias(bias: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingParams(logit_bias=bias).validate()


def test_validate_accepts_logit_bias_edges() -> None:
    SamplingParams(logit_bias={0: -100.0, 1: 100.0, 2: 0.0, 3: 2.5}).validate()
    SamplingParams(logit_bias={t: -0.5 for t in range(MAX_LOGIT_BIAS)}).validate()
