"""The KV-cache format flags `atlas serve` and `atlas generate` share.

`--help` must not import the runtime (tests/server/test_cli_errors.py), so the choices and
the calibration default are restated here; tests/unit/test_kv_quant.py holds them equal to
`runtime.kv_cache.KV_DTYPES` and `runtime.ops.kv_quant.DEFAULT_CALIBRATION_TOKENS`."""

from __future__ import annotations

from typing import Any, Callable

import click

#: the KV formats load_runner accepts (runtime.kv_cache.KV_DTYPES)
KV_DTYPES = ("bf16", "fp8", "nvfp4")
#: tokens the first prefill calibrates fp8 KV scales over (runtime.ops.kv_quant)
DEFAULT_CALIBRATION_TOKENS = 512


def kv_cache_flags(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add --kv-cache-dtype, --fp8-kv-calibration-tokens and --kv-high-precision-layers."""
    for option in reversed((
        click.option("--kv-cache-dtype", type=click.Choice(list(KV_DTYPES)), default="bf16",
                     show_default=True, help="KV cache element format: fp8 (E4M3 with "
                     "per-layer, per-kv-head K/V scales) holds twice the tokens of bf16, "
                     "nvfp4 (E2M1 with an E4M3 scale per 16 elements under the same scales) "
                     "3.6 times."),
        click.option("--fp8-kv-calibration-tokens", type=click.IntRange(min=1),
                     default=DEFAULT_CALIBRATION_TOKENS, show_default=True,
                     help="fp8/nvfp4 KV without checkpoint k_scale/v_scale: the first "
                     "prefill's first N tokens set each head's scale (amax / 448, nvfp4 amax "
                     "/ 2688), fixed afterwards."),
        click.option("--kv-high-precision-layers", type=click.IntRange(min=0), default=0,
                     show_default=True, help="Keep the first and last N attention layers' "
                     "KV in bf16 with a quantized --kv-cache-dtype."),
    )):
        fn = option(fn)
    return fn


def kv_load_kwargs(p: dict[str, Any]) -> dict[str, Any]:
    """load_runner's keywords for the flags in `p`."""
    return {"kv_cache_dtype": p["kv_cache_dtype"],
            "fp8_kv_calibration_tokens": p["fp8_kv_calibration_tokens"],
            "kv_high_precision_layers": p["kv_high_precision_layers"]}
