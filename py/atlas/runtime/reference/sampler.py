"""Reference for the sampler kernels (kernels/*/common/sampler.cu): the sampler's specification.

Per-row inputs are SAMPLE_ROW records; penalty state is per slot (counts i32 [slots, V],
prompt_mask u8 [slots, V]), and so are the logit biases (bias_ids i32 / bias_vals f32
[slots, max_bias]). All arithmetic is float32 like the kernel.

* apply_penalties_f32, rows with slot >= 0: repetition penalty p (<= 0 means 1) on tokens seen
  in the prompt or generated (logit > 0 ? logit / p : logit * p), then
  logit -= presence * (count > 0) + frequency * count over generated tokens, then
  logit += bias_vals[slot, i] for token bias_ids[slot, i], i < min(num_bias, max_bias)
  (ids are distinct; one outside 0..V-1 is skipped). Rows with slot < 0 are untouched.
* sample_f32: temperature <= 0 (or no finite logit) -> argmax (reference.argmax rule).
  Otherwise z = (logit - max) / T, and a non-NaN token is kept when its order key
  (`order_keys`) is >= the top-k key (the k-th largest, ties kept) and >= the top-p key (the
  largest key whose kept mass within the top-k set reaches ceil(top_p * that set's mass), with
  mass = trunc(2^31 * exp(z))), and z >= log(min_p). The token is the lowest index of the
  largest z + gumbel(seed, step, token) over the kept set: an exact draw from the renormalized
  softmax that depends on nothing but the row itself. With counts, counts[slot, token] += 1
  for rows with slot >= 0; with host_ids, host_ids[parity[0] * pitch + r] = token.
* apply_token_bitmask_f32: logits[r, t] = -inf where bit t of mask row mask_rows[r] is 0
  (tokens past the mask's words count as 0); rows with mask_rows[r] < 0 are untouched.
* logprobs_f32, rows with top_n[r] >= 0: lse = log(sum(exp(x))) over non-NaN logits,
  out_logprob[r] = x[tokens[r]] - lse (-inf for a NaN logit or a bad id), and the
  min(top_n, max_top, vocab) largest logits
  (ties to the lower index, NaN never; id -1 and -inf once none is left) with x - lse.
  A row without a finite logit reports -inf.
"""

from __future__ import annotations

import math

import numpy as np

from ..gpu import Dim3
from ..kernel_abi import (SAMPLE_ROW, SAMPLER_LOGPROBS, SAMPLER_PENALTIES, SAMPLER_SAMPLE,
                          SAMPLER_TOKEN_BITMASK)
from . import HostMemory, reference
from .argmax import argmax_rows

MASS_SCALE = np.float32(2.0 ** 31)
_M64 = (1 << 64) - 1
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_STEP_MUL, _TOKEN_MUL = 0xD1B54A32D192ED03, 0x9E3779B97F4A7C15


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def stream_base(seed: int, step: int) -> int:
    """The per-(seed, step) key of the counter-based RNG."""
    x = np.array([(seed ^ (step * _STEP_MUL)) & _M64], dtype=np.uint64)
    return int(_mix64(x)[0])


def gumbel(seed: int, step: int, tokens: np.ndarray) -> np.ndarray:
    """float32 Gumbel noise -log(-log(u)) for each token id, u = (23 random bits + 0.5) / 2^23."""
    base = np.uint64(stream_base(seed, step))
    r = _mix64(base + (tokens.astype(np.uint64) + np.uint64(1)) * np.uint64(_TOKEN_MUL))
    u = ((r >> np.uint64(41)).astype(np.float32) + np.float32(0.5)) * np.float32(2.0 ** -23)
    return -np.log(-np.log(u))


def order_keys(x: np.ndarray) -> np.ndarray:
    """uint32 keys ordered like the float32 values (-0 sorts below +0)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return np.where(u & np.uint32(0x80000000), ~u, u | np.uint32(0x80000000))


def _largest_key_reaching(keys: np.ndarray, weight: np.ndarray, need: int, default: int) -> int:
    """The largest key t with sum(weight[keys >= t]) >= need; `default` when the total falls
    short (the filter then cuts nothing)."""
    order = np.argsort(keys, kind="stable")[::-1]
    cum = np.cumsum(weight[order], dtype=np.uint64)
    j = int(np.searchsorted(cum, np.uint64(need), side="left"))
    return int(keys[order[j]]) if j < cum.size else default


def sample_row(x: np.ndarray, p: np.void) -> int:
    """The sampled token of one float32 logits row under row parameters `p`."""
    temperature = np.float32(p["temperature"])
    finite_max = np.where(np.isnan(x), -np.inf, x).max()
    if temperature <= 0 or not finite_max > -np.inf:
        return int(argmax_rows(x[None, :])[0])
    valid = ~np.isnan(x)
    keys = order_keys(x)
    floor = 0
    top_k = int(p["top_k"])
    if 0 < top_k < x.size:
        floor = _largest_key_reaching(keys[valid], np.ones(int(valid.sum()), np.uint64), top_k, 0)
    with np.errstate(invalid="ignore"):
        z = ((x - np.float32(finite_max)) / temperature).astype(np.float32)
    top_p = np.float32(p["top_p"])
    if top_p < 1:
        cand = valid & (keys >= floor)
        mass = (np.exp(z[cand]) * MASS_SCALE).astype(np.uint64)
        need = max(1, math.ceil(float(top_p) * float(int(mass.sum(dtype=np.uint64)))))
        floor = _largest_key_reaching(keys[cand], mass, need, floor)
    kept = valid & (keys >= floor)
    min_p = np.float32(p["min_p"])
    if min_p > 0:
        kept &= z >= np.log(min_p)
    idx = np.flatnonzero(kept)
    seed = int(p["seed_lo"]) | (int(p["seed_hi"]) << 32)
    score = z[idx] + gumbel(seed, int(p["step"]), idx)
    return int(idx[int(np.argmax(score))])


def _params(mem: HostMemory, ptr: int, rows: int) -> np.ndarray:
    return mem.view(ptr, SAMPLE_ROW, rows)


@reference(SAMPLER_PENALTIES)
def apply_penalties_f32(mem: HostMemory, grid: Dim3, block: Dim3, logits: int, row_params: int,
                        counts: int, prompt_mask: int, bias_ids: int, bias_vals: int, rows: int,
                        vocab: int, max_bias: int) -> None:
    params = _params(mem, row_params, rows)
    x_all = mem.view(logits, np.float32, rows * vocab).reshape(rows, vocab)
    for r, p in enumerate(params):
        rep = np.float32(p["repetition"]) if p["repetition"] > 0 else np.float32(1.0)
        presence, frequency = np.float32(p["presence"]), np.float32(p["frequency"])
        slot = int(p["slot"])
        if slot < 0:
            continue
        if not (rep == 1 and presence == 0 and frequency == 0):
            c = mem.view(counts + 4 * slot * vocab, np.int32, vocab)
            seen = (c > 0) | (mem.view(prompt_mask + slot * vocab, np.uint8, vocab) != 0)
            x = x_all[r]
            x = np.where(seen, np.where(x > 0, x / rep, x * rep), x)
            x_all[r] = x - (presence * (c > 0).astype(np.float32)
                            + frequency * c.astype(np.float32))
        n = min(int(p["num_bias"]), max_bias)
        if n:
            ids = mem.view(bias_ids + 4 * slot * max_bias, np.int32, n).astype(np.int64)
            vals = mem.view(bias_vals + 4 * slot * max_bias, np.float32, n)
            ok = (ids >= 0) & (ids < vocab)
            x_all[r, ids[ok]] += vals[ok]


@reference(SAMPLER_SAMPLE)
def sample_f32(mem: HostMemory, grid: Dim3, block: Dim3, logits: int, row_params: int, out: int,
               scratch: int, counters: int, rows: int, vocab: int, counts: int, host_ids: int,
               parity: int, pitch: int, top_n: int, out_logprob: int, top_ids: int,
               top_logprobs: int, max_top: int) -> None:
    # scratch and counters are the kernel's block-to-block workspace: nothing to model (the
    # counters stay zero, as the kernel leaves them).
    params = _params(mem, row_params, rows)
    x = mem.view(logits, np.float32, rows * vocab).reshape(rows, vocab)
    tok = np.array([sample_row(x[r], params[r]) for r in range(rows)], dtype=np.int32)
    mem.view(out, np.int32, rows)[:] = tok
    slots = params["slot"].astype(np.int64)
    ok = (slots >= 0) & (tok >= 0) & (tok < vocab)
    if counts and ok.any():
        flat = mem.view(counts, np.int32, (int(slots[ok].max()) + 1) * vocab)
        np.add.at(flat, slots[ok] * vocab + tok[ok].astype(np.int64), 1)
    if host_ids and rows:
        which = int(mem.view(parity, np.int32, 1)[0])
        mem.view(host_ids + 4 * which * pitch, np.int32, rows)[:] = tok
    if top_n and rows:
        _logprobs(mem, x, tok, top_n, out_logprob, top_ids, top_logprobs, rows, vocab, max_top)


@reference(SAMPLER_TOKEN_BITMASK)
def apply_token_bitmask_f32(mem: HostMemory, grid: Dim3, block: Dim3, logits: int, bitmask: int,
                            mask_rows: int, rows: int, vocab: int, words: int) -> None:
    x = mem.view(logits, np.float32, rows * vocab).reshape(rows, vocab)
    which = mem.view(mask_rows, np.int32, rows)
    for r in np.flatnonzero(which >= 0).tolist():
        row = mem.view(bitmask + 4 * int(which[r]) * words, np.uint32, words)
        allowed = np.zeros(max(vocab, 32 * words), dtype=bool)
        allowed[:32 * words] = np.unpackbits(row.view(np.uint8), bitorder="little").astype(bool)
        x[r, ~allowed[:vocab]] = -np.inf


@reference(SAMPLER_LOGPROBS)
def logprobs_f32(mem: HostMemory, grid: Dim3, block: Dim3, logits: int, tokens: int, top_n: int,
                 out_logprob: int, top_ids: int, top_logprobs: int, rows: int, vocab: int,
                 max_top: int) -> None:
    x_all = mem.view(logits, np.float32, rows * vocab).reshape(rows, vocab)
    _logprobs(mem, x_all, mem.view(tokens, np.int32, rows), top_n, out_logprob, top_ids,
              top_logprobs, rows, vocab, max_top)


def _logprobs(mem: HostMemory, x_all: np.ndarray, tok: np.ndarray, top_n: int, out_logprob: int,
              top_ids: int, top_logprobs: int, rows: int, vocab: int, max_top: int) -> None:
    """logprobs_f32's outputs (and sample_f32's, for its drawn tokens) of the rows of x_all
    [rows, vocab] whose top_n entry is >= 0, for the tokens `tok`."""
    wanted = mem.view(top_n, np.int32, rows)
    out = mem.view(out_logprob, np.float32, rows)
    ids = mem.view(top_ids, np.int32, rows * max_top).reshape(rows, max_top)
    lps = mem.view(top_logprobs, np.float32, rows * max_top).reshape(rows, max_top)
    for r in np.flatnonzero(wanted >= 0).tolist():
        x = x_all[r]
        valid = np.flatnonzero(~np.isnan(x))
        m = np.float32(x[valid].max()) if valid.size else np.float32(-np.inf)
        finite = bool(m > -np.inf)
        lse = np.float32(m + np.log(np.exp(x[valid] - m).sum(dtype=np.float32))) if finite \
            else np.float32(-np.inf)
        t = int(tok[r])
        out[r] = x[t] - lse if finite and 0 <= t < vocab and not np.isnan(x[t]) else -np.inf
        order = valid[np.lexsort((valid, -x[valid]))]
        count = min(int(wanted[r]), max_top, vocab)
        for k in range(count):
            if k < order.size:
                ids[r, k] = order[k]
                lps[r, k] = x[order[k]] - lse if finite else -np.inf
            else:
                ids[r, k], lps[r, k] = -1, -np.inf
