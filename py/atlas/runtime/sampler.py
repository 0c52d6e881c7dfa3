"""Sampler: token selection on the GPU for a batch of rows, graph-capturable.

Each step the host writes one SAMPLE_ROW record per batch row (`prepare`, O(batch)), then
`enqueue` issues three fixed launches on the logits: penalties (in place), sampling, and the
count update that feeds the next step's penalties. Sampling splits each row over many blocks,
which share a scratch area and per-row arrival counters (zeroed here once; every launch leaves
them zero, so graph replays start clean). Per-sequence penalty state (generated-token
counts, prompt-token mask) lives on the device in rows indexed by a slot that the caller
assigns per sequence (`assign`, which also restores the counts of a sequence back from
preemption), so no step re-sends a sequence's history. Every buffer is allocated here once,
so the addresses a captured graph holds stay valid.

Logit biases (OpenAI's `logit_bias` between its mask values) are per-slot state too:
`assign` uploads a sequence's (token, bias) entries into its slot's row of two device tables
([max_slots, MAX_LOGIT_BIAS] ids and values) and its row record carries how many there are;
the penalty launch adds them after the penalties. A slot's biases are fixed by `assign`:
`prepare` with params whose `logit_bias` differs from the assigned ones raises rather than
sample with the old entries (a sequence's params do not change while it holds its slot;
assign again to change them).

Sampling is keyed by (seed, step) through a counter-based RNG: a seeded request draws the same
tokens whatever else shares its batch. Semantics: `atlas.runtime.reference.sampler`.

With `token_masks=True` (structured output) a fourth launch comes first: rows that carry a
grammar mask get -inf on every disallowed token. The host writes the masks straight into
the pinned `host_bitmask` rows (a grammar matcher's `fill_next_token_bitmask`, while the
forward pass runs), then `upload_token_masks` copies them and each row's mask index.

With `max_logprobs=K` the sampling launch's finishing blocks report, for rows that ask
(`prepare_logprobs`), the sampled token's log-probability and the top-n (n <= K) tokens
with theirs, computed on the device from the logits the token was drawn from (after
penalties, logit biases and grammar masks, before temperature): only rows x (1 + 2K)
numbers come back.
A logprobs launch scores given tokens on logits rows the sampler leaves alone (`score`:
prompt logprobs, the raw log-softmax of the rows after the sampled ones), the tokens
uploaded with `prepare_logprobs`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..core.sampling import MAX_LOGIT_BIAS, SamplingParams
from .gpu import DevicePtr, GpuBackend, Stream
from .kernel_abi import SAMPLE_ROW
from .ops import KernelCache, sampling

_SEED_MASK = (1 << 64) - 1
#: SAMPLE_ROW as 4-byte words (every field is 4 bytes), and the word holding `step`
_ROW_WORDS = SAMPLE_ROW.itemsize // 4
_STEP_WORD = SAMPLE_ROW.fields["step"][1] // 4


class Sampler:
    """Device-side sampling state for up to `max_batch` rows and `max_slots` sequences."""

    def __init__(self, backend: GpuBackend, kernels: KernelCache, max_batch: int,
                 max_slots: int, vocab: int, seed: int | None = None,
                 token_masks: bool = False, max_logprobs: int = 0) -> None:
        if min(max_batch, max_slots, vocab) < 1:
            raise ValueError(f"sampler: max_batch={max_batch}, max_slots={max_slots} and "
                             f"vocab={vocab} must all be positive")
        if vocab > sampling.SAMPLE_MAX_VOCAB:
            raise ValueError(f"sampler: vocab={vocab} exceeds {sampling.SAMPLE_MAX_VOCAB}")
        self.backend = backend
        self.kernels = kernels
        self.max_batch = max_batch
        self.max_slots = max_slots
        self.vocab = vocab
        self.counts = self._zeroed(4 * max_slots * vocab)       # i32 [max_slots, vocab]
        self.prompt_mask = self._zeroed(max_slots * vocab)      # u8  [max_slots, vocab]
        # logit biases: i32 ids / f32 values [max_slots, MAX_LOGIT_BIAS], staged per slot in
        # pinned rows that the stream-ordered upload reads (`assign`)
        self.bias_ids = self._zeroed(4 * max_slots * MAX_LOGIT_BIAS)
        self.bias_vals = self._zeroed(4 * max_slots * MAX_LOGIT_BIAS)
        self._bias_ids_np = backend.alloc_host_pinned(4 * max_slots * MAX_LOGIT_BIAS).view(
            np.int32).reshape(max_slots, MAX_LOGIT_BIAS)
        self._bias_vals_np = backend.alloc_host_pinned(4 * max_slots * MAX_LOGIT_BIAS).view(
            np.float32).reshape(max_slots, MAX_LOGIT_BIAS)
        #: the entries `assign` uploaded for each slot (a `prepare` must ask for these)
        self._slot_bias: list[tuple[tuple[int, float], ...]] = [()] * max_slots
        self.row_params = self._zeroed(SAMPLE_ROW.itemsize * max_batch)
        self.out_ids = self._zeroed(4 * max_batch)              # i32 [max_batch]
        scratch_bytes, counter_bytes = sampling.sample_scratch_bytes(max_batch, vocab)
        self.scratch = self.backend.alloc(scratch_bytes)
        self.counters = self._zeroed(counter_bytes)             # u32 [max_batch]
        self._rows_np = backend.alloc_host_pinned(SAMPLE_ROW.itemsize * max_batch).view(SAMPLE_ROW)
        #: the row records live in a caller's step inputs, copied with them (`stage_rows`)
        self._rows_staged = False
        self._seeds_np = np.zeros(max_slots, dtype=np.uint64)
        #: each slot's last row record (step 0) and the params it was built from: a step's
        #: rows are gathered from these, and only rows whose params changed are rebuilt
        self._slot_rows = np.zeros(max_slots, dtype=SAMPLE_ROW)
        #: the same records as rows of 4-byte words, gathered by slot with one np.take
        self._slot_words = self._slot_rows.view(np.uint32).reshape(max_slots, _ROW_WORDS)
        self._row_words = self._rows_np.view(np.uint32).reshape(max_batch, _ROW_WORDS)
        self._slot_params: list[SamplingParams | None] = [None] * max_slots
        #: the slots whose records the host rows hold (the last `prepare`'s, until a
        #: slot's record changes): a step of the same slots rewrites only the step words
        self._gathered: list[int] | None = None
        # Seeds for requests that bring none: fresh per sequence, reproducible per sampler seed.
        self._seed_rng = np.random.default_rng(seed)
        self.mask_words = sampling.bitmask_words(vocab)
        self.token_bitmask: DevicePtr | None = None
        self.mask_rows: DevicePtr | None = None
        if token_masks:
            mask_bytes = 4 * self.mask_words * max_batch
            self.token_bitmask = self._zeroed(mask_bytes)         # u32 [max_batch, words]
            self.mask_rows = backend.alloc(4 * max_batch)         # i32 [max_batch]
            backend.memset(self.mask_rows, 0xFF, 4 * max_batch)   # -1: no mask
            self.host_bitmask = backend.alloc_host_pinned(mask_bytes).view(np.uint32).reshape(
                max_batch, self.mask_words)
            self.host_bitmask[:] = 0
            self._mask_rows_np = backend.alloc_host_pinned(4 * max_batch).view(np.int32)
        self.max_logprobs = max_logprobs
        self._logprob_buffers: tuple[DevicePtr, ...] = ()
        if max_logprobs > 0:
            self.top_n = backend.alloc(4 * max_batch)                  # i32 [max_batch]
            backend.memset(self.top_n, 0xFF, 4 * max_batch)            # -1: no logprobs
            self.out_logprob = self._zeroed(4 * max_batch)             # f32 [max_batch]
            self.top_ids = self._zeroed(4 * max_batch * max_logprobs)  # i32 [max_batch, K]
            self.top_logprobs = self._zeroed(4 * max_batch * max_logprobs)
            #: the tokens `score` reports on, one per scored row
            self.scored_tokens = self._zeroed(4 * max_batch)            # i32 [max_batch]
            self._logprob_buffers = (self.top_n, self.out_logprob, self.top_ids,
                                     self.top_logprobs, self.scored_tokens)
            self._top_n_np = backend.alloc_host_pinned(4 * max_batch).view(np.int32)
            self._scored_np = backend.alloc_host_pinned(4 * max_batch).view(np.int32)

    def stage_rows(self, device: DevicePtr, host: np.ndarray) -> None:
        """Keep the row records in `device` and the pinned `host` words (max_batch records
        each, part of the caller's per-step inputs): `prepare` then only writes `host`, and
        the caller's own upload carries them, one host-to-device copy a step where there
        were two. Call before capturing any graph (graphs hold the records' address)."""
        words = SAMPLE_ROW.itemsize // 4 * self.max_batch
        if host.dtype.itemsize != 4 or host.size != words or not host.flags.c_contiguous:
            raise ValueError(f"sampler.stage_rows: host must be {words} contiguous 4-byte "
                             f"words, got {host.size} of {host.dtype}")
        self.backend.free(self.row_params)
        self.row_params = device
        self._rows_np = host.view(SAMPLE_ROW)
        self._row_words = host.view(np.uint32).reshape(self.max_batch, _ROW_WORDS)
        self._rows_staged = True
        self._gathered = None

    def _zeroed(self, nbytes: int) -> DevicePtr:
        ptr = self.backend.alloc(nbytes)
        self.backend.memset(ptr, 0, nbytes)
        return ptr

    def _check_slot(self, slot: int) -> None:
        if not 0 <= slot < self.max_slots:
            raise ValueError(f"sampler slot {slot} is outside 0..{self.max_slots - 1}")

    # ---- per sequence -------------------------------------------------------------------
    def assign(self, slot: int, prompt_ids: Sequence[int], params: SamplingParams,
               drawn_counts: Mapping[int, int] | None = None,
               stream: Stream | None = None) -> None:
        """Give `slot` to a sequence: record its prompt, its seed and its penalty counts.

        `drawn_counts` (token -> times drawn) restores the counts of a sequence that resumes
        after preemption; a new sequence starts from zero. Runs once per (re)admission,
        outside any graph: its O(vocab) work is device memsets and at most two uploads, only
        when the request has penalties. The memsets are queued on `stream` (ordered after a
        step still running that used the slot, without waiting for it); the uploads, from
        temporary host arrays, are synchronous. The logit biases are copied on `stream` from
        the slot's pinned staging row, which only the slot's next `assign` rewrites: the
        caller must not reassign a slot before the device has passed the copy (the runner
        waits for a step's input copies before its next launch assigns anything).
        """
        self._check_slot(slot)
        params.validate()
        self._upload_logit_bias(slot, params.logit_bias, stream)
        seed = params.seed if params.seed is not None else int(self._seed_rng.integers(2 ** 63))
        self._seeds_np[slot] = seed & _SEED_MASK
        self._set_slot_row(slot, params)
        v = self.vocab
        counts_ptr = self.counts + 4 * slot * v
        if drawn_counts and params.has_penalties:
            counts = np.zeros(v, dtype=np.int32)
            for token, n in drawn_counts.items():
                if not 0 <= token < v:
                    raise ValueError(f"sampler: drawn token {token} is outside the vocabulary "
                                     f"0..{v - 1}")
                counts[token] = n
            self.backend.copy_h2d(counts_ptr, counts)
        else:
            self.backend.memset(counts_ptr, 0, 4 * v, stream)
        mask_ptr = self.prompt_mask + slot * v
        ids = np.asarray(prompt_ids, dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < v)]
        if params.effective_repetition_penalty != 1.0 and ids.size:
            mask = np.zeros(v, dtype=np.uint8)
            mask[ids] = 1
            self.backend.copy_h2d(mask_ptr, mask)
        else:
            self.backend.memset(mask_ptr, 0, v, stream)

    def _upload_logit_bias(self, slot: int, entries: tuple[tuple[int, float], ...],
                           stream: Stream | None) -> None:
        bad = [t for t, _ in entries if not 0 <= t < self.vocab]
        if bad:
            raise ValueError(f"sampler: logit_bias token ids {bad[:5]} are outside the "
                             f"vocabulary 0..{self.vocab - 1}")
        if entries:
            n = len(entries)
            ids, vals = self._bias_ids_np[slot, :n], self._bias_vals_np[slot, :n]
            ids[:], vals[:] = zip(*entries)
            row = 4 * slot * MAX_LOGIT_BIAS
            self.backend.copy_h2d(self.bias_ids + row, ids, stream)
            self.backend.copy_h2d(self.bias_vals + row, vals, stream)
        self._slot_bias[slot] = entries

    # ---- per step -----------------------------------------------------------------------
    def prepare(self, slots: Sequence[int], params: Sequence[SamplingParams],
                steps: Sequence[int], stream: Stream | None = None) -> None:
        """Upload this step's row records: row i samples for `slots[i]` under `params[i]`,
        `steps[i]` being how many tokens that sequence has generated (the RNG counter, which
        the caller owns so that it survives the slot). Staged rows (`stage_rows`) are only
        written: the caller uploads them with its step inputs before the launches."""
        n = len(slots)
        if not len(params) == len(steps) == n:
            raise ValueError(f"sampler.prepare: {n} slots, {len(params)} params, "
                             f"{len(steps)} steps")
        if n > self.max_batch:
            raise ValueError(f"sampler.prepare: {n} rows exceed max_batch={self.max_batch}")
        if not n:
            return
        for slot, p in zip(slots, params):
            if not 0 <= slot < self.max_slots:
                self._check_slot(slot)
            if p is not self._slot_params[slot]:
                self._set_slot_row(slot, p)
        words = self._row_words[:n]
        if self._gathered != slots:  # else the rows hold these slots' records already
            np.take(self._slot_words, np.fromiter(slots, np.int64, n), axis=0, out=words)
            self._gathered = list(slots)
        words[:, _STEP_WORD] = np.fromiter(steps, np.int64, n) & 0xFFFFFFFF
        if not self._rows_staged:
            self.backend.copy_h2d(self.row_params, self._rows_np[:n], stream)

    def _set_slot_row(self, slot: int, p: SamplingParams) -> None:
        """The row record of `slot` under `p` (its seed from `assign`; step 0)."""
        if p.logit_bias != self._slot_bias[slot]:
            raise ValueError(f"sampler slot {slot}: the params' logit_bias differs from the "
                             "one assign uploaded; assign the slot again to change it")
        seed = int(self._seeds_np[slot])
        self._slot_rows[slot] = (slot, min(p.top_k, 2 ** 31 - 1), seed & 0xFFFFFFFF, seed >> 32,
                                 0, p.temperature, p.top_p, p.min_p,
                                 p.effective_repetition_penalty, p.presence_penalty,
                                 p.frequency_penalty, len(p.logit_bias))
        self._slot_params[slot] = p
        self._gathered = None

    def upload_token_masks(self, constrained: Sequence[bool], stream: Stream | None = None,
                           ) -> None:
        """This step's grammar masks: row i uses `host_bitmask[i]` when `constrained[i]`,
        no mask otherwise; rows past len(constrained) have none. Copies only the rows used."""
        if self.token_bitmask is None or self.mask_rows is None:
            raise ValueError("sampler: token masks need Sampler(..., token_masks=True)")
        n = len(constrained)
        if n > self.max_batch:
            raise ValueError(f"sampler.upload_token_masks: {n} rows exceed "
                             f"max_batch={self.max_batch}")
        which = self._mask_rows_np
        which[:] = -1
        which[:n] = np.where(np.asarray(constrained, dtype=bool), np.arange(n), -1)
        used = int(np.flatnonzero(which >= 0).max()) + 1 if (which >= 0).any() else 0
        if used:
            self.backend.copy_h2d(self.token_bitmask, self.host_bitmask[:used], stream)
        self.backend.copy_h2d(self.mask_rows, which, stream)

    def prepare_logprobs(self, top_n: Sequence[int], stream: Stream | None = None,
                         scored: Sequence[int] = ()) -> None:
        """Row i reports logprobs when top_n[i] >= 0 (0: the sampled token's alone), with
        its top_n[i] best alternatives; rows past len(top_n) report none. `scored`: the
        tokens the last len(scored) of those rows report on instead of a sampled one (rows
        `score` reads; uploaded only when there are any)."""
        if not self._logprob_buffers:
            raise ValueError("sampler: logprobs need Sampler(..., max_logprobs=K)")
        if len(top_n) > self.max_batch:
            raise ValueError(f"sampler.prepare_logprobs: {len(top_n)} rows exceed "
                             f"max_batch={self.max_batch}")
        if any(n > self.max_logprobs for n in top_n):
            raise ValueError(f"sampler.prepare_logprobs: top_n {max(top_n)} exceeds "
                             f"max_logprobs={self.max_logprobs}")
        if len(scored) > len(top_n):
            raise ValueError(f"sampler.prepare_logprobs: {len(scored)} scored tokens for "
                             f"{len(top_n)} rows")
        self._top_n_np[:] = -1
        self._top_n_np[:len(top_n)] = np.maximum(np.asarray(top_n, dtype=np.int64), -1)
        self.backend.copy_h2d(self.top_n, self._top_n_np, stream)
        if scored:
            self._scored_np[:len(scored)] = scored
            self.backend.copy_h2d(self.scored_tokens, self._scored_np[:len(scored)], stream)

    def logprob_host_buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pinned host arrays for one step's logprobs (sampled [max_batch], top ids and top
        logprobs [max_batch, max_logprobs]), filled by `queue_logprobs`."""
        b, k = self.max_batch, self.max_logprobs
        pinned = self.backend.alloc_host_pinned
        return (pinned(4 * b).view(np.float32), pinned(4 * b * k).view(np.int32).reshape(b, k),
                pinned(4 * b * k).view(np.float32).reshape(b, k))

    def queue_logprobs(self, rows: int, into: tuple[np.ndarray, np.ndarray, np.ndarray],
                       stream: Stream) -> None:
        """Queue on `stream` the copies of the logprobs of the step just enqueued (its
        first `rows` rows) into `into` (`logprob_host_buffers`): read them once the stream
        has passed this point, while later steps overwrite the device buffers."""
        for dst, src in zip(into, (self.out_logprob, self.top_ids, self.top_logprobs)):
            self.backend.copy_d2h(dst[:rows], src, stream)

    def read_logprobs(self, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sampled-token logprob [rows], top ids [rows, K], top logprobs [rows, K]) of the
        last step, copied to the host (synchronously); only columns < top_n are valid."""
        k = self.max_logprobs
        return (self.backend.download(self.out_logprob, np.float32, rows),
                self.backend.download(self.top_ids, np.int32, (rows, k)),
                self.backend.download(self.top_logprobs, np.float32, (rows, k)))

    def enqueue(self, stream: Stream, logits: DevicePtr, rows: int, masked: bool = True,
                publish: sampling.PublishIds | None = None) -> None:
        """Mask (when enabled), penalize and bias f32 logits [rows, vocab] in place, sample into
        `out_ids` counting the samples (and, with `publish`, copying them to the host's
        buffer: a captured step's output), report logprobs (when enabled). `masked=False`:
        the caller guarantees no row of these launches carries a grammar mask (a decode
        graph the runner replays only for unmasked steps), so the mask launch is left out
        rather than run to find every row unmasked.

        Issues launches only (no allocation, copy or synchronization): safe to capture.
        """
        if not 0 <= rows <= self.max_batch:
            raise ValueError(f"sampler.enqueue: rows={rows} outside 0..{self.max_batch}")
        kc, v = self.kernels, self.vocab
        if masked and self.token_bitmask is not None and self.mask_rows is not None:
            sampling.apply_token_bitmask(kc, stream, logits, self.token_bitmask, self.mask_rows,
                                         rows, v, self.mask_words)
        sampling.apply_penalties(kc, stream, logits, self.row_params, self.counts,
                                 self.prompt_mask, self.bias_ids, self.bias_vals, rows, v,
                                 MAX_LOGIT_BIAS)
        logprobs = (sampling.LogprobRows(self.top_n, self.out_logprob, self.top_ids,
                                         self.top_logprobs, self.max_logprobs)
                    if self._logprob_buffers else None)
        sampling.sample(kc, stream, logits, self.row_params, self.out_ids, self.scratch,
                        self.counters, rows, v, self.counts, publish, logprobs)

    def score(self, stream: Stream, logits: DevicePtr, first: int, rows: int) -> None:
        """Report, for logits rows first .. first + rows - 1, the logprob of the tokens
        `prepare_logprobs` uploaded as `scored` and their rows' top-n alternatives, into the
        same rows of the logprob buffers (`queue_logprobs` copies them with the sampled
        rows'). The rows are read as they are: the caller keeps them out of `enqueue`'s
        rows, so no penalty or mask touched them."""
        if not self._logprob_buffers:
            raise ValueError("sampler: scoring needs Sampler(..., max_logprobs=K)")
        if first < 0 or rows < 0 or first + rows > self.max_batch:
            raise ValueError(f"sampler.score: rows {first}..{first + rows - 1} outside "
                             f"0..{self.max_batch - 1}")
        k = self.max_logprobs
        sampling.logprobs(self.kernels, stream, logits + 4 * first * self.vocab,
                          self.scored_tokens, self.top_n + 4 * first,
                          self.out_logprob + 4 * first, self.top_ids + 4 * first * k,
                          self.top_logprobs + 4 * first * k, rows, self.vocab, k)

    def close(self) -> None:
        """Free the device buffers (the sampler is unusable afterwards)."""
        own_rows = None if self._rows_staged else self.row_params
        for ptr in (self.counts, self.prompt_mask, self.bias_ids, self.bias_vals, own_rows,
                    self.out_ids, self.scratch,
                    self.counters, self.token_bitmask, self.mask_rows,
                    *self._logprob_buffers):
            if ptr is not None:
                self.backend.free(ptr)
