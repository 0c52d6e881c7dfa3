"""Check cases for the sampler kernels: penalties, sampling under every filter, the count
update and host copy of its finishing blocks.

The sampling oracle is written from the rules in float64 with plain Python integers for the
RNG (sorting for top-k/top-p instead of the kernel's radix select), so it shares no code with
the numpy reference. A near-tie between two Gumbel scores (below float32 resolution) could in
principle split them; the seeds below are fixed, so a case either always passes or never.

sample_f32 splits a row into 4096-logit blocks whose candidates usually settle every filter;
the wide cases also force each fallback to the whole row (a top_k beyond the candidates, a
flat nucleus, no filter, all-equal rows) and put ties and NaN across block boundaries. Every
sampling case checks that the launch leaves its arrival counters zero (graph replays).
"""

from __future__ import annotations

import math

import numpy as np

from ...core.dtype import DType
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_abi import SAMPLE_ROW
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, sampling

_M64 = (1 << 64) - 1


def row_params(rows: list[dict[str, float | int]]) -> np.ndarray:
    """SAMPLE_ROW records from dicts; omitted fields are neutral (greedy off, filters off)."""
    out = np.zeros(len(rows), dtype=SAMPLE_ROW)
    out["slot"] = -1
    out["temperature"] = 1.0
    out["top_p"] = 1.0
    out["repetition"] = 1.0
    for i, fields in enumerate(rows):
        for name, value in fields.items():
            out[name][i] = value
    return out


# ---- penalties and logit biases -----------------------------------------------------------

def _penalty_oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    logits = inputs["logits"].astype(np.float64).copy()
    max_bias = inputs["bias_ids"].shape[1]
    for r, p in enumerate(inputs["row_params"]):
        slot = int(p["slot"])
        if slot < 0:
            continue
        rep = float(p["repetition"]) if p["repetition"] > 0 else 1.0
        count = inputs["counts"][slot].astype(np.float64)
        seen = (count > 0) | (inputs["prompt_mask"][slot] != 0)
        x = logits[r]
        x[seen] = np.where(x[seen] > 0, x[seen] / rep, x[seen] * rep)
        x -= float(p["presence"]) * (count > 0) + float(p["frequency"]) * count
        for i in range(min(int(p["num_bias"]), max_bias)):
            token = int(inputs["bias_ids"][slot, i])
            if 0 <= token < x.size:
                x[token] += float(inputs["bias_vals"][slot, i])
    return {"logits": logits}


#: penalty rows: with and without penalties and biases, a row without state (untouched
#: whatever it asks), a row whose num_bias exceeds the table (clamped), a neutral row
PENALTY_SETTINGS = [dict(slot=0, repetition=1.3, presence=0.5, frequency=0.25, num_bias=5),
                    dict(slot=-1, repetition=2.0, presence=1.0, num_bias=3),
                    dict(slot=1, repetition=0.0, frequency=-0.4),   # rep 0 means 1
                    dict(slot=2, repetition=0.8, num_bias=1 << 30),
                    dict(slot=1),                                   # all neutral
                    dict(slot=3, num_bias=7)]                        # biases alone


def _bias_table(rng: np.random.Generator, slots: int, vocab: int,
                max_bias: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ids a slot (the first and last token, both sides of a 1024-token span
    boundary, random ones; slot 3 also an id past the vocabulary and a negative one, which
    are skipped); biases of either sign up to 100."""
    ids = np.zeros((slots, max_bias), dtype=np.int32)
    vals = np.zeros((slots, max_bias), dtype=np.float32)
    edges = [t for t in (0, vocab - 1, 1023, 1024, 2047, 2048) if t < vocab]
    for s in range(slots):
        rest = rng.permutation(np.setdiff1d(np.arange(vocab), edges))
        row = np.unique(np.concatenate([edges, rest[:max_bias]]))[:max_bias]
        row = rng.permutation(row)
        if s == 3 and max_bias > 4:
            row[[1, 4]] = [vocab, -5]
        ids[s], vals[s] = row, rng.uniform(-100, 100, max_bias).astype(np.float32)
    return ids, vals


def _penalty_case(rng: np.random.Generator, rows: int, vocab: int,
                  max_bias: int = 8) -> KernelCase:
    slots = 4
    counts = rng.integers(0, 4, (slots, vocab)).astype(np.int32)
    counts[rng.random((slots, vocab)) < 0.7] = 0
    mask = (rng.random((slots, vocab)) < 0.2).astype(np.uint8)
    settings = PENALTY_SETTINGS
    params = row_params([settings[r % len(settings)] for r in range(rows)])
    ids, vals = _bias_table(rng, slots, vocab, max_bias)
    inputs = {"logits": (rng.standard_normal((rows, vocab)) * 4).astype(np.float32),
              "row_params": params, "counts": counts, "prompt_mask": mask,
              "bias_ids": ids, "bias_vals": vals}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        sampling.apply_penalties(KernelCache(backend), stream, p["logits"], p["row_params"],
                                 p["counts"], p["prompt_mask"], p["bias_ids"], p["bias_vals"],
                                 rows, vocab, max_bias)

    return KernelCase(f"penalties_{rows}x{vocab}_b{max_bias}", "sampler", inputs,
                      {"logits": OutputSpec(DType.FP32, (rows, vocab))}, run, _penalty_oracle)


# ---- sampling -----------------------------------------------------------------------------

def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _gumbel(seed: int, step: int, token: int) -> float:
    base = _mix((seed ^ (step * 0xD1B54A32D192ED03)) & _M64)
    bits = _mix((base + (token + 1) * 0x9E3779B97F4A7C15) & _M64) >> 41
    return -math.log(-math.log((bits + 0.5) / 2 ** 23))


def expected_token(x: np.ndarray, p: np.void) -> int:
    """The token the sampler must pick from logits row x, from the rules in float64."""
    ok = np.flatnonzero(~np.isnan(x))
    if ok.size == 0:
        return 0
    vals = x[ok].astype(np.float64)
    best = vals.max()
    t = float(p["temperature"])
    if t <= 0 or best == -math.inf:
        return int(ok[np.flatnonzero(vals == best)[0]])
    order = np.lexsort((ok, -vals))  # descending value, then ascending index
    kept, kept_vals = ok[order], vals[order]
    k = int(p["top_k"])
    if 0 < k < x.size and k <= kept.size:
        keep = kept_vals >= kept_vals[k - 1]
        kept, kept_vals = kept[keep], kept_vals[keep]
    prob = np.exp((kept_vals - best) / t)
    if p["top_p"] < 1:
        # smallest prefix (by descending probability) holding top_p of the mass, ties kept
        reach = np.cumsum(prob) >= float(p["top_p"]) * prob.sum()
        keep = kept_vals >= kept_vals[int(np.argmax(reach))]
        kept, kept_vals, prob = kept[keep], kept_vals[keep], prob[keep]
    if p["min_p"] > 0:
        keep = prob >= float(p["min_p"])
        kept, kept_vals = kept[keep], kept_vals[keep]
    seed = int(p["seed_lo"]) | (int(p["seed_hi"]) << 32)
    scores = [((v - best) / t + _gumbel(seed, int(p["step"]), int(i)), -int(i))
              for i, v in zip(kept.tolist(), kept_vals.tolist())]
    return -max(scores)[1]


def _sample_oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"out": np.array([expected_token(row, p) for row, p in
                             zip(inputs["logits"], inputs["row_params"])], dtype=np.float64),
            "counters": np.zeros(len(inputs["logits"]))}


SAMPLE_SETTINGS = [
    dict(temperature=0.0),
    dict(temperature=0.7),
    dict(temperature=1.0, top_k=1),
    dict(temperature=1.3, top_k=20),
    dict(temperature=1.0, top_p=0.9),
    dict(temperature=1.0, top_p=1e-6),
    dict(temperature=0.8, min_p=0.1),
    dict(temperature=1.1, top_k=50, top_p=0.8, min_p=0.05),
    dict(temperature=2.0, top_k=5000),  # k beyond the vocabulary: no cut
]


def _sample_case(rng: np.random.Generator, name: str, logits: np.ndarray,
                 settings: list[dict[str, float | int]]) -> KernelCase:
    rows, vocab = logits.shape
    params = row_params([dict(s, seed_lo=int(rng.integers(0, 2 ** 32)),
                              seed_hi=int(rng.integers(0, 2 ** 32)),
                              step=int(rng.integers(0, 1000))) for s in settings])

    scratch_bytes, _ = sampling.sample_scratch_bytes(rows, vocab)
    inputs = {"logits": logits, "row_params": params,
              "scratch": np.full(scratch_bytes, 0xFF, dtype=np.uint8),  # needs no init
              "counters": np.zeros(rows, dtype=np.int32)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        sampling.sample(KernelCache(backend), stream, p["logits"], p["row_params"], p["out"],
                        p["scratch"], p["counters"], rows, vocab)

    return KernelCase(name, "sampler", inputs,
                      {"out": OutputSpec(DType.I32, (rows,)),
                       "counters": OutputSpec(DType.I32, (rows,))}, run, _sample_oracle)


def _special_logits(vocab: int) -> np.ndarray:
    """All equal; -inf except three; all -inf; NaN sprinkled; heavy ties at the top."""
    rows = np.zeros((5, vocab), dtype=np.float32)
    rows[1, :] = -np.inf
    rows[1, [3, vocab // 2, vocab - 1]] = [1.0, 2.0, 2.0]
    rows[2, :] = -np.inf
    rows[3, :] = np.linspace(-3, 3, vocab, dtype=np.float32)
    rows[3, ::7] = np.nan
    rows[4, :] = np.round(np.linspace(-2, 2, vocab)).astype(np.float32)
    return rows


def _block_boundary_logits(rng: np.random.Generator, vocab: int) -> np.ndarray:
    """Wide rows for the multi-block path: ties at the top spread over blocks (and straddling
    a block boundary), NaN and -inf blocks, all -inf, integer-valued (tied) logits, and a
    peaked row."""
    c = sampling.SAMPLE_CHUNK
    rows = (rng.standard_normal((6, vocab)) * 2).astype(np.float32)
    ties = np.array([c - 1, c, 3 * c + 7, vocab - 1])
    rows[0, ties] = 12.0                     # four tied maxima in four blocks
    rows[1, :c] = np.nan                     # a NaN-only block, a -inf-only block
    rows[1, c:2 * c] = -np.inf
    rows[1, rng.integers(2 * c, vocab, 500)] = np.nan
    rows[2, :] = -np.inf                     # nothing finite: token 0
    rows[3, ties] = 9.0
    rows[3, ties[:2] + 1] = 8.5
    rows[4, :] = np.round(rows[4])           # ties at every level, within and across blocks
    rows[5, :] = (rng.standard_normal(vocab) * 3).astype(np.float32)
    return rows


# ---- the finishing blocks' count update and host copy --------------------------------------

def _emit_oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    got = _sample_oracle(inputs)
    counts = inputs["counts"].astype(np.float64).copy()
    host = inputs["host_ids"].astype(np.float64).copy()
    pitch, parity = host.size // 2, int(inputs["parity"][0])
    for r, (tok, p) in enumerate(zip(got["out"].astype(int).tolist(), inputs["row_params"])):
        if p["slot"] >= 0:
            counts[p["slot"], tok] += 1
        host[parity * pitch + r] = tok
    return dict(got, counts=counts, host_ids=host)


def _emit_case(rng: np.random.Generator, rows: int, vocab: int, parity: int,
               pitch: int) -> KernelCase:
    """sample_f32 with counts and a host copy: rows with and without a penalty slot (several
    rows on one slot: one add each), greedy and sampling, the ids into host buffer `parity`
    of two `pitch`-word buffers (the other one untouched)."""
    slots = 4
    settings = [dict(SAMPLE_SETTINGS[i % len(SAMPLE_SETTINGS)], slot=int(s),
                     seed_lo=int(rng.integers(0, 2 ** 32)), step=int(rng.integers(0, 1000)))
                for i, s in enumerate(rng.integers(-1, slots, rows))]
    logits = (rng.standard_normal((rows, vocab)) * 3).astype(np.float32)
    scratch_bytes, _ = sampling.sample_scratch_bytes(rows, vocab)
    inputs = {"logits": logits, "row_params": row_params(settings),
              "scratch": np.full(scratch_bytes, 0xFF, dtype=np.uint8),
              "counters": np.zeros(rows, dtype=np.int32),
              "counts": rng.integers(0, 3, (slots, vocab)).astype(np.int32),
              "host_ids": rng.integers(-(1 << 20), 0, 2 * pitch).astype(np.int32),
              "parity": np.array([parity], dtype=np.int32)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        sampling.sample(KernelCache(backend), stream, p["logits"], p["row_params"], p["out"],
                        p["scratch"], p["counters"], rows, vocab, p["counts"],
                        sampling.PublishIds(p["host_ids"], p["parity"], pitch))

    return KernelCase(f"sample_emit_{rows}x{vocab}_parity{parity}", "sampler", inputs,
                      {"out": OutputSpec(DType.I32, (rows,)),
                       "counters": OutputSpec(DType.I32, (rows,)),
                       "counts": OutputSpec(DType.I32, (slots, vocab)),
                       "host_ids": OutputSpec(DType.I32, (2 * pitch,))}, run, _emit_oracle)


# ---- grammar masks ------------------------------------------------------------------------

def _bitmask_oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    logits = inputs["logits"].astype(np.float64).copy()
    words = inputs["bitmask"].shape[1]
    for r, m in enumerate(inputs["mask_rows"].tolist()):
        if m < 0:
            continue
        for t in range(logits.shape[1]):
            word = t // 32
            bit = (int(inputs["bitmask"][m, word]) >> (t % 32)) & 1 if word < words else 0
            if not bit:
                logits[r, t] = -math.inf
    return {"logits": logits}


def _bitmask_case(rng: np.random.Generator, rows: int, vocab: int, words: int) -> KernelCase:
    """Random bits, plus all-allowed, all-masked and sparse rows; unconstrained rows; a mask
    row used twice; `words` may fall short of the vocabulary (the tail is masked)."""
    masks = rng.integers(0, 2 ** 32, (4, words), dtype=np.uint64).astype(np.uint32)
    masks[1] = 0xFFFFFFFF
    masks[2] = 0
    masks[3] = 0
    masks[3, rng.integers(0, words, 5)] = np.uint32(1) << rng.integers(0, 32, 5).astype(np.uint32)
    mask_rows = np.array([[0, -1, 1, 2, 3, 0, -1][r % 7] for r in range(rows)], dtype=np.int32)
    inputs = {"logits": (rng.standard_normal((rows, vocab)) * 3).astype(np.float32),
              "bitmask": masks, "mask_rows": mask_rows}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        sampling.apply_token_bitmask(KernelCache(backend), stream, p["logits"], p["bitmask"],
                                     p["mask_rows"], rows, vocab, words)

    return KernelCase(f"token_bitmask_{rows}x{vocab}_w{words}", "sampler", inputs,
                      {"logits": OutputSpec(DType.FP32, (rows, vocab))}, run, _bitmask_oracle)


# ---- logprobs -----------------------------------------------------------------------------

def _logprob_oracle(max_top: int):
    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        logits = inputs["logits"]
        rows, vocab = logits.shape
        out = np.full(rows, np.nan)
        ids = np.full((rows, max_top), np.nan)
        lps = np.full((rows, max_top), np.nan)
        for r in range(rows):
            if inputs["top_n"][r] < 0:
                continue
            row = [(float(v), i) for i, v in enumerate(logits[r].tolist()) if not math.isnan(v)]
            best = max((v for v, _ in row), default=-math.inf)
            lse = (best + math.log(math.fsum(math.exp(v - best) for v, _ in row))
                   if best > -math.inf else -math.inf)

            def logprob(v: float) -> float:
                return v - lse if lse > -math.inf else -math.inf

            sampled = float(logits[r, inputs["tokens"][r]])
            out[r] = -math.inf if math.isnan(sampled) else logprob(sampled)
            ranked = sorted(row, key=lambda vi: (-vi[0], vi[1]))
            for k in range(min(int(inputs["top_n"][r]), max_top, vocab)):
                ids[r, k], lps[r, k] = ((ranked[k][1], logprob(ranked[k][0])) if k < len(ranked)
                                        else (-1, -math.inf))
        return {"out_logprob": out, "top_ids": ids, "top_logprobs": lps}
    return oracle


def _logprob_case(rng: np.random.Generator, name: str, logits: np.ndarray, top_n: list[int],
                  max_top: int) -> KernelCase:
    rows, vocab = logits.shape
    wanted = np.array(top_n, dtype=np.int32)
    inputs = {"logits": logits, "tokens": rng.integers(0, vocab, rows).astype(np.int32),
              "top_n": wanted}
    written = np.array([[0 <= k < min(n, max_top, vocab) for k in range(max_top)]
                        for n in top_n])

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        sampling.logprobs(KernelCache(backend), stream, p["logits"], p["tokens"], p["top_n"],
                          p["out_logprob"], p["top_ids"], p["top_logprobs"], rows, vocab,
                          max_top)

    return KernelCase(name, "sampler", inputs,
                      {"out_logprob": OutputSpec(DType.FP32, (rows,)),
                       "top_ids": OutputSpec(DType.I32, (rows, max_top)),
                       "top_logprobs": OutputSpec(DType.FP32, (rows, max_top))},
                      run, _logprob_oracle(max_top),
                      compare_mask={"out_logprob": wanted >= 0, "top_ids": written,
                                    "top_logprobs": written})


def _sample_logprobs_case(rng: np.random.Generator, name: str, logits: np.ndarray,
                          top_n: list[int], max_top: int) -> KernelCase:
    """sample_f32 reporting its rows' logprobs (the finishing blocks' logprobs_f32 body, for
    the drawn tokens): greedy and sampling rows, rows asking none, the sampled token alone
    and top-n alternatives."""
    rows, vocab = logits.shape
    settings = [dict(SAMPLE_SETTINGS[i % len(SAMPLE_SETTINGS)],
                     seed_lo=int(rng.integers(0, 2 ** 32)), step=int(rng.integers(0, 1000)))
                for i in range(rows)]
    wanted = np.array(top_n, dtype=np.int32)
    scratch_bytes, _ = sampling.sample_scratch_bytes(rows, vocab)
    inputs = {"logits": logits, "row_params": row_params(settings),
              "scratch": np.full(scratch_bytes, 0xFF, dtype=np.uint8),
              "counters": np.zeros(rows, dtype=np.int32), "top_n": wanted}
    written = np.array([[0 <= k < min(n, max_top, vocab) for k in range(max_top)]
                        for n in top_n])

    def oracle(ins: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        got = _sample_oracle(ins)
        return dict(got, **_logprob_oracle(max_top)(dict(ins, tokens=got["out"].astype(int))))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        sampling.sample(KernelCache(backend), stream, p["logits"], p["row_params"], p["out"],
                        p["scratch"], p["counters"], rows, vocab,
                        logprobs=sampling.LogprobRows(p["top_n"], p["out_logprob"],
                                                      p["top_ids"], p["top_logprobs"],
                                                      max_top))

    return KernelCase(name, "sampler", inputs,
                      {"out": OutputSpec(DType.I32, (rows,)),
                       "counters": OutputSpec(DType.I32, (rows,)),
                       "out_logprob": OutputSpec(DType.FP32, (rows,)),
                       "top_ids": OutputSpec(DType.I32, (rows, max_top)),
                       "top_logprobs": OutputSpec(DType.FP32, (rows, max_top))},
                      run, oracle,
                      compare_mask={"out_logprob": wanted >= 0, "top_ids": written,
                                    "top_logprobs": written})


def _logprob_cases(rng: np.random.Generator) -> list[KernelCase]:
    """Random rows at the Qwen3 vocabulary; then ties, NaN, -inf (a grammar-masked row),
    all -inf, and fewer candidates than asked for, on a small vocabulary."""
    wide = (rng.standard_normal((4, 151936)) * 3).astype(np.float32)
    small = (rng.standard_normal((6, 37)) * 2).astype(np.float32)
    small[0, [3, 9, 20]] = small[0].max() + 1.0          # a three-way tie at the top
    small[1, ::3] = np.nan
    small[2, :] = -np.inf
    small[2, [5, 6]] = [0.5, 0.25]                         # only two tokens allowed
    small[3, :] = -np.inf
    small[4, 1:] = np.nan                                  # a single candidate
    return [_logprob_case(rng, "logprobs_4x151936", wide, [20, 0, -1, 5], 20),
            _logprob_case(rng, "logprobs_special_6x37", small, [5, 8, 4, 3, 3, 37], 40),
            _sample_logprobs_case(rng, "sample_logprobs_5x151936",
                                  (rng.standard_normal((5, 151936)) * 3).astype(np.float32),
                                  [20, 0, -1, 5, 1], 20),
            _sample_logprobs_case(rng, "sample_logprobs_special_6x37", small,
                                  [5, 8, 4, -1, 3, 37], 40)]


@kernel_cases("sampler")
def sampler_cases(rng: np.random.Generator) -> list[KernelCase]:
    n = len(SAMPLE_SETTINGS)
    # 130 rows x 9 spans: 8 blocks a row, the first striding to the ninth (ragged) span; 64
    # rows of Qwen3's vocabulary: 16 blocks a row, each owning (and biasing) ~9 spans
    cases = [_penalty_case(rng, 5, 300), _penalty_case(rng, 7, 1503, max_bias=300),
             _penalty_case(rng, 130, 9000), _penalty_case(rng, 6, 4096, max_bias=1),
             _penalty_case(rng, 64, 151936, max_bias=300)]
    for vocab in (1000, 4099):
        logits = (rng.standard_normal((n, vocab)) * 3).astype(np.float32)
        cases.append(_sample_case(rng, f"sample_{n}x{vocab}", logits, SAMPLE_SETTINGS))
    special = _special_logits(777)
    cases.append(_sample_case(rng, "sample_special_777", special,
                              [dict(temperature=1.0), dict(temperature=0.5, top_p=0.5),
                               dict(temperature=1.0, top_k=3), dict(temperature=0.9, min_p=0.2),
                               dict(temperature=1.0, top_k=40, top_p=0.3)]))
    wide = (rng.standard_normal((3, 151936)) * 2).astype(np.float32)
    cases.append(_sample_case(rng, "sample_3x151936", wide,
                              [dict(temperature=0.0), dict(temperature=1.0, top_k=1),
                               dict(temperature=1.0, top_p=1e-6)]))
    # the bench's rows (logits * 3, T 0.7): greedy, top-k + top-p, top-p alone; plus min-p,
    # a top_k beyond what the blocks publish (full-row radix) and top-k 1
    bench = (rng.standard_normal((6, 151936)) * 3).astype(np.float32)
    cases.append(_sample_case(rng, "sample_mixed_6x151936", bench,
                              [dict(temperature=0.0), dict(temperature=0.7, top_k=50, top_p=0.9),
                               dict(temperature=0.7, top_p=0.9),
                               dict(temperature=0.7, top_k=1000, min_p=0.02),
                               dict(temperature=1.0, top_k=5000), dict(temperature=1.0, top_k=1)]))
    edges = _block_boundary_logits(rng, 151936)
    cases.append(_sample_case(rng, "sample_blocks_6x151936", edges,
                              [dict(temperature=1.0, top_k=3), dict(temperature=0.8, top_p=0.5),
                               dict(temperature=1.0, top_p=0.9), dict(temperature=1.0, top_k=4),
                               dict(temperature=1.0, top_k=10), dict(temperature=0.0)]))
    # whole-row fallbacks whose oracles walk most of the row (a flat nucleus, no filter, all
    # equal: no block can publish a cutoff below it): a smaller (5-block) vocabulary
    flat = (rng.standard_normal((3, 20000)) * 0.1).astype(np.float32)
    flat[2, :] = np.float32(-1.5)
    cases.append(_sample_case(rng, "sample_fallback_3x20000", flat,
                              [dict(temperature=1.0, top_p=0.9), dict(temperature=0.6),
                               dict(temperature=1.0, top_k=7, top_p=0.5)]))
    cases += [_emit_case(rng, 9, 500, 0, 9), _emit_case(rng, 130, 64, 1, 160),
              _emit_case(rng, 3, 151936, 1, 4)]
    cases += [_bitmask_case(rng, 7, 1003, sampling.bitmask_words(1003)),
              _bitmask_case(rng, 9, 151936, sampling.bitmask_words(151936)),
              _bitmask_case(rng, 3, 700, 20)]
    return cases + _logprob_cases(rng)
