"""Kernel-path switches for A/B runs, read from the environment when a KernelCache is built.

Read when the runner (its KernelCache) is built, not when a module is imported: a process
that builds two runners under different settings (a benchmark comparing paths, a test) gets
what it asked for each time, and importing Atlas never depends on the environment.

* ATLAS_GEMM_SM90=0: every GEMM on the mma.sync kernel, never the Hopper wgmma one.
* ATLAS_GEMM_TMA=0: the Hopper wgmma prefill GEMM on its cp.async kernel (gemm_sm90, every
  thread issuing 16-byte copies, a block barrier every k-tile: the session-5 kernel) instead
  of its warp-specialized TMA twin (gemm_sm90_tma: one producer thread, tensor maps, full /
  empty mbarriers, no block barrier in the loop); the same tiles and wgmma sequence, bit for
  bit. On by default: gpu44's kernel table (Qwen3-8B prefill 2,048, us) qkv 146.1 vs 164.1,
  o_proj 107.0 vs 116.5, gate_up 654.7 vs 709.1, down 297.2 vs 334.6; gpu45's prefill step
  54.70 vs 58.48 ms (37,443 vs 35,021 tok/s).
  ATLAS_GEMM_TMA_MULTICAST=1: the TMA twin in clusters of two m-tiles whose W tile each
  block copies half of into both (gemm_sm90_tma_cluster2_*: 32 KB of L2 reads a k-tile a
  block instead of 48; the same bits). Off: ~1.6x slower (gpu44: qkv 243.8 us, gate_up 982.1).
  ATLAS_GEMM_SWIGLU=0: a prefill gate_up on the TMA twin writes [gate | up] and silu_mul
  (gelu_tanh_mul) follows, instead of the twin's gated entry ending with the activation
  (gemm_sm90_tma_{swiglu,geglu}_bf16: gate and up rows of 128 features a tile, the same bits
  as the pair; the [m, 2 I] round trip and one launch a layer leave the step).
  ATLAS_GEMM_TMA_PERSISTENT=1: the TMA twin on a persistent grid (the blocks the device
  holds at once, each looping over tiles gridDim.x apart in the raster order; its producer
  fills the next tile's stages while the consumers store the last one) instead of one block
  a tile; with or without the multicast clusters. Off: within 1-3% either way (gpu44: qkv
  157.0 us vs 146.1, down 288.9 vs 297.2).
* ATLAS_BATCHED_GEMV=0: decode batches of more than GEMV rows on the skinny GEMM, never on
  the tensor-core batched GEMV (gemv_mma).
* ATLAS_BATCHED_GEMV_MIN_M=N: fewest rows routed to the batched GEMV (default
  DEFAULT_BATCHED_GEMV_MIN_M).
* ATLAS_GEMV_MMA_WIDE=1 / 0: the batched GEMV's wide / narrow blocks for every product that
  allows them; unset, its wave model decides.
* ATLAS_QUANT_MMA=0: FP8 / NVFP4 decode batches on the CUDA-core GEMV passes (gemv_fp8,
  gemv_nvfp4), never on the tensor-core GEMV (gemv_mma_quant).
* ATLAS_QUANT_DIRECT=0 / 1: FP8 / NVFP4 tensor-core products of 1..8 rows on the GEMV's
  shared-memory ring kernel (gemv_mma_quant) / on its register-fed twin (gemv_quant_direct);
  unset, on the twin wherever the loaded set has it.
* ATLAS_QUANT_E2M1_LUT=1: the twin's NVFP4 entry points decode E2M1 through the byte tables
  of gemv_mma_quant (the session-5 decode) instead of the bit moves: the A/B of the decode.
* ATLAS_QUANT_PERSISTENT=1: the twin launched as one wave of blocks looping over an even
  share of the 16-row tiles (ops/matmul_quant_mma.direct_blocks) instead of one block per
  tile. Off by default: gpu16 (2026-12-02 02:49) timed NVFP4 gate_up (byte-table rows)
  28.49 us persistent vs 26.09 one block per tile, the other rows were lost.
  ATLAS_QUANT_BLOCKS_PER_SM=1..4: that one-wave grid (implies ATLAS_QUANT_PERSISTENT=1)
  with this many blocks per SM for every product (at most the loop's occupancy: 2, or 4 / 3
  on the narrow loops) (unset: the rule, the fewest tiles on the
  busiest SM), for sweeps on the device.
* ATLAS_QUANT_TILE_LOOP=1 / 0: the twin's products on its one-block-per-tile loop
  (gemv_quant_direct.cu gemv_direct_tile, the session-6 loop) / on its pipelined loop
  (gemv_direct) for both formats; unset, FP8 on the tile loop (gpu18, 2026-12-02 04:36: 20-25%
  faster for FP8 at every Qwen3-8B shape) and NVFP4 on the pipelined one (7-11% faster on
  qkv / o / down with its cheaper decode). The one-wave grid and the byte-table decode run
  pipelined whatever this says.
* ATLAS_QUANT_STAGED=1 / 0: the twin's products staged through shared memory by bulk copies
  (gemv_quant_direct.cu gemv_staged, entry points gemv_qs_*: one block of 16 warps per SM,
  ~200 KiB of its weights in flight from before the PDL wait) wherever the weight meets its
  preconditions (ops/matmul_quant_mma.staged_supports) / never; unset, the launch builder's
  per-format rule (ops/matmul_quant_mma.uses_staged: off for both until timed on the device).
* ATLAS_QUANT_NARROW=1 | 2 | 0: the twin's pipelined loop on narrow load batches with more
  blocks per SM (gemv_quant_direct.cu gemv_qd_*_n1_*: one step a batch, four blocks of 8 warps
  an SM; _n2_: two steps, three blocks) / never; unset, the launch builder's per-format rule
  (ops/matmul_quant_mma.NARROW_BY_DEFAULT) unless ATLAS_QUANT_TILE_LOOP is set. Set, it
  overrides ATLAS_QUANT_TILE_LOOP; the byte-table decode and the staged variant take
  precedence over it.
* ATLAS_QUANT_FP8_CORE=1 / 0: FP8 products of one row (qkv, o_proj, down; not the gate_up
  that ends with its SwiGLU) on the CUDA-core GEMV decoding E4M3 by the hardware convert
  (gemv_fp8.cu gemv_fp8_cvt_bf16_single: the bf16 GEMV's mould, ~3 instructions a weight,
  none of them on the integer pipe) / on the tensor-core route; unset, the launch builder's
  rule (ops/matmul_quant.FP8_CORE_BY_DEFAULT). The A/B of issue 12's batch-1 FP8 GEMVs.
* ATLAS_QUANT_FP8_CORE_SWIGLU=1 / 0: where the convert GEMV takes FP8 rows, the gate_up of
  one row ending with its SwiGLU on its twin too (gemv_fp8_cvt_swiglu_bf16_single) / on the
  tensor-core kernel (gemv_qd_fp8_swiglu); unset, ops/matmul_quant.FP8_CORE_SWIGLU_BY_DEFAULT.
* ATLAS_QUANT_NVFP4_H2=1 / 0: NVFP4 products of one row (qkv, o_proj, down, the gate_up that
  ends with its SwiGLU, a quantized LM head) on the CUDA-core GEMV with packed half-precision
  FMAs (gemv_nvfp4.cu gemv_nvfp4_h2_*: exact f16 decode, ~2.75 instructions a weight) / on
  the tensor-core route; unset, the launch builder's rule (ops/matmul_nvfp4.H2_BY_DEFAULT).
  The A/B of issue 12's batch-1 NVFP4 GEMVs.
* ATLAS_QUANT_H2_ROWS=4|8: the NVFP4 half-precision-FMA GEMV's rows a block (8: one chunk
  of each row a thread, gemv_nvfp4_h2x8_*, each x chunk's conversion shared by twice the
  rows); unset, ops/matmul_nvfp4.H2_ROWS.
* ATLAS_EARLY_TRIGGER=all | none | KIND[,KIND..] (kinds: EARLY_TRIGGER_KINDS = norm, silu,
  combine, gate): which short kernels before a projection let it launch before their own PDL
  wait (the *_early_* entry points: add_rmsnorm, silu_mul, decode_attn_combine,
  sigmoid_gate_mul), at every row count; unset, every kind from
  ops/early_trigger.EARLY_MIN_ROWS rows on.
* ATLAS_NORM_ROWS_PER_BLOCK=1..16: rows each block of a many-row plain RMSNorm launch takes
  (a prefill's first and final norms, ops/norm.rmsnorm_grid; default
  DEFAULT_NORM_ROWS_PER_BLOCK = 3), the next row's loads in flight under the current row's
  stores (row_loop.cuh); 1 is one block a row, the grid before session 42.
* ATLAS_NORM_LATE=1 / 0: the residual add + RMSNorm launches that do not trigger early
  (batch 1) let the projection after them launch only once their rows have landed
  (add_rmsnorm[_offset]_late_bf16, ops/norm.norm_triggers_late), as the attention's late
  trigger does for o_proj; unset, by the smallest projection after such a norm
  (ops/norm.norm_late_pays, model/load.py).
* ATLAS_EMBED_NORM=0: a decode step looks its token embeddings up in their own launch
  (embedding_bf16) before the first layer's RMSNorm, instead of in that norm's launch
  (rmsnorm.cu embed_rmsnorm_*, ops/norm.embed_norm_fuses): the same bits, one launch more.
* ATLAS_QUANT_FP8_H2=1 / 0: FP8 products of one row (qkv, o_proj, down, the gate_up that ends
  with its SwiGLU, a quantized LM head) on the CUDA-core GEMV with packed half-precision FMAs
  (gemv_fp8.cu gemv_fp8_h2_*: the NVFP4 kernel's loop (gemv_h2.cuh) on the hardware E4M3
  convert, ~1.5 instructions a weight, its range guard from |x| >= 16) / on the routes
  without it (ATLAS_QUANT_FP8_CORE's convert GEMV, the tensor-core gate_up + SwiGLU and
  logits); unset, the launch builder's rule (ops/matmul_quant.FP8_H2_BY_DEFAULT). The A/B of
  issue 12's batch-1 FP8 GEMVs (Qwen3-8B FP8 block-scaled batch 1 at 1.46x bf16, goal 1.75x);
  the rule is off since gpu44 / gpu45 measured the h2 GEMV slower.
* ATLAS_QUANT_FP8_WGMMA=1: FP8 products of 1..8 rows (every projection, the gate_up ending
  with its SwiGLU, a quantized LM head's logits) on Hopper's FP8 tensor cores
  (gemm_decode_fp8.cu via ops/matmul_fp8_wgmma: the weight bytes reach the tensor cores with
  no convert instruction, x split exactly into two E4M3 parts) ahead of every GEMV route,
  where the weight's scale layout is constant over 128-column tiles. Off until a device
  run times it against the convert GEMV (issue 12's 1.75x).
* ATLAS_QUANT_FP8_WGMMA_STAGES=2..16 / ATLAS_QUANT_FP8_WGMMA_SM_BLOCKS=1..4: that kernel's
  ring slots (8 KiB weight tiles; the launch's shared memory follows, so a shallower ring
  leaves its SMs room for the kernels PDL launches beside it) and its persistent grid's
  blocks an SM at most (defaults DEFAULT_FP8_WGMMA_STAGES, DEFAULT_FP8_WGMMA_SM_BLOCKS).
* ATLAS_DECODE_GEMM=0: decode batches never on the Hopper skinny wgmma GEMM
  (gemm_decode_sm90); they take the batched GEMV / GEMM routes as before it existed.
* ATLAS_DECODE_GEMM_MIN_M=N / ATLAS_DECODE_GEMM_MAX_M=N: the row range routed to it
  (defaults DEFAULT_DECODE_GEMM_MIN_M..DEFAULT_DECODE_GEMM_MAX_M).
* ATLAS_DECODE_GEMM_SPLIT=1..8: its cluster split of K for every product (unset: the
  launch builder's occupancy rule, ops/matmul_decode.decode_split; 3, 5, 6 and 7 only on the
  TMA kernel); also the FP8 tensor-core decode GEMM's where the split fits its x tiles
  (ops/matmul_fp8_wgmma.split_for).
* ATLAS_DECODE_GEMM_ANY_SPLIT=1: the split rule of the TMA decode GEMM picks among every
  cluster size 1..8 (DECODE_GEMM_TMA_SPLITS) instead of the powers of two: Qwen3-8B o_proj /
  down at 64 rows are 32 two-warpgroup tiles, split 4 does not fit the H200's clusters of 4
  (124 blocks), so split 2 streams on 64 of 132 SMs; split 3 on 96. Off by default until the
  A/B (kernel table rows "... split3", the b64 step) is measured.
* ATLAS_DECODE_GEMM_WIDE=1 / 0: its batches of 17 rows and more on two-warpgroup blocks (128
  weight rows sharing each x tile: 1.5x the weight bytes through L2 at 64 rows instead of
  2x, and 112 KB of weights in flight per SM instead of 64) / on one-warpgroup blocks.
  Unset, each kernel's default (ops/matmul_decode.decode_groups): two on the TMA kernel from
  33 rows, one on the cp.async kernel (tools/gpu/run_suite.sh decode_gemm_tma's "wide" rows).
* ATLAS_DECODE_GEMM_SWIGLU=0: a dense MLP's gate_up on the decode GEMM writes [gate | up] and
  silu_mul makes the activation (two launches), instead of the GEMM ending with the SwiGLU
  (gemm_decode_sm90_swiglu_*: one launch, half the output bytes): the A/B of the fusion; the
  same for Gemma 3's GeGLU entries (gelu_tanh_mul after the GEMM when off).
* ATLAS_DECODE_GEMM_TMA=0: the decode GEMM on its cp.async kernel (gemm_decode_sm90, every
  thread issuing 16-byte copies into the ring: the session-7 kernel) instead of the TMA one
  (gemm_decode_tma: one producer thread, tensor maps, a ring with every slot in flight); the
  same products, splits and block shapes, bit for bit.
* ATLAS_DECODE_GEMM_OCCUPANCY=0: the decode GEMM's split rule assumes sm_count x blocks per SM
  for every split, instead of counting, split by split, the blocks the driver says the device
  holds at once (cuOccupancyMaxActiveClusters: a cluster's blocks must share a GPC; the H200
  holds 62 four-block clusters, 248 blocks, not 264, so the modelled rule's split-4 grids of
  256 blocks ran in two waves: Qwen3-8B b64 step 9.987 -> 9.543 ms with the count, gpu21;
  tools/gpu/decode_gemm_occupancy.py prints both).
* ATLAS_DECODE_GEMM_PERSISTENT=0: a TMA decode GEMM launch whose grid runs more than one
  wave at a split with persistent entries (1 and 2: matmul_decode.PERSISTENT_SPLITS) on the
  one-tile entry, each wave refilling its rings from empty, instead of the persistent form
  (the default): as many clusters as the device holds at once, each looping over tiles with
  one ring whose next tile streams in during the epilogue. The tuner's timings of a shape
  time the form the route takes (its table key says persistent). Measured (gpu58,
  2026-12-03, Qwen3-8B batch 64 x 1,536, PDL on, GPU per step, on / off in both orders):
  9.162 / 9.166 ms vs 9.210 / 9.259; gate_up 63.44 us a call vs 66.04.
* ATLAS_DECODE_GEMM_STREAMK=0: the tuner never times the TMA decode GEMM's stream-K entries
  (matmul_decode.STREAMK: one block per resident slot over an equal share of the (tile,
  k-tile) units, partial tiles summed by the block holding their first k-tile), so a launch
  keeps a cluster split. On by default: the tuner adopts it only where it times faster (by
  the tuner's 4%), and its table keys say so.
* ATLAS_DECODE_GEMM_TUNE=0: the decode GEMM's split and warpgroups a block come from the
  model (decode_split over the driver's occupancy, decode_groups) for every launch shape, as
  before session 15, instead of from measuring: on a device (the CUDA backend), the first
  eager launch of a shape (wgmma width, n, k, output, epilogue, kernel) that neither argument
  nor ATLAS_DECODE_GEMM_SPLIT / _WIDE forces times every candidate with the call's own
  operands and keeps the fastest (ops/decode_gemm_tune.py: the model's pick unless one is 4%
  faster), remembered in $ATLAS_TUNE_CACHE (default ~/.cache/atlas/decode_gemm_tune.json) per
  GPU, SM count and PTX module. A shape first met inside a graph capture runs the model's pick.
* ATLAS_DECODE_GEMM_L2_TILES=N: k-tiles (64 columns) of its weight rows each decode GEMM
  block keeps prefetched into L2 ahead of its shared-memory ring, from before its PDL wait
  (default DEFAULT_DECODE_GEMM_L2_TILES = 0: none, the session-6 kernel; see there why).
* ATLAS_DECODE_ATTN_LONG=0: decode attention never on the tensor-core split-K kernel
  (attention_long); ATLAS_DECODE_ATTN_LONG_MIN_KEYS=N: the shortest block-table reach (keys)
  that takes it at every batch (default ops/attention_long.LONG_CONTEXT_KEYS);
  ATLAS_DECODE_ATTN_LONG_MIN_BATCH=N: the fewest sequences of a launch that take it at any
  context, with its wave-filling split count (default DEFAULT_DECODE_ATTN_LONG_MIN_BATCH; 0:
  never by batch, the session-7 routing: such batches on decode_attn_rope / decode_attn).
* ATLAS_DECODE_ATTN_LONG_MERGE=1 / 0: a tensor-core decode attention launch of several splits
  merges its partials in its last split (attention_long.cu SplitMerge, the split counters'
  tickets) / in the decode_attn_combine_bf16 launch after it, at every batch; unset, the
  last split merges at launches of up to DEFAULT_DECODE_ATTN_LONG_MERGE_MAX_SEQS sequences
  on the rope-fused entries, and on the plain ones where the group's merge is one item a
  thread (ops/attention_long.merges_splits; batch 1: the combine was a launch of its own in
  the latency chain, gpu37 PDL off 3.61 us a layer on Qwen3-0.6B x 512, 5.90 on Qwen3-8B x
  1,536, beside the kernel's 7.94 / 8.97; batch 8: gpu106 below the default) and the combine
  runs after larger ones (batch 9 and more: their merge is unmeasured) and after
  the plain entries' larger groups (session 25: Qwen3.5's D 256 group of 8, the combine
  2.329 / 2.329 ms a step against 2.345 / 2.346 merged, gpu93; the rope-fused early entry of
  Qwen3-30B-A3B's group of 8 loses 4.2% on the combine, gpu94: it keeps merging).
* ATLAS_DECODE_ATTN_LONG_STAGED=0: the rope-fused tensor-core decode attention on
  decode_attn_long_rope_wait_bf16 (each warp's rows from global memory, four dependent trips
  before the loop) instead of decode_attn_long_rope_staged_bf16 (the prologue's reads in two
  trips, the norms and rotations from shared memory; the same bits). Measured (gpu39,
  2026-12-03, Qwen3-8B batch 64 x 1,536, PDL on): staged 9.430 ms a step vs 9.503, kernel
  row 102.34 vs 104.34 us.
* ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER (1 / 0; unset: ops/attention_long.late_trigger_pays
  by the model's attention and o_proj, `model.load`: gated attention before an o_proj of 12
  MiB and more): the batch-1 entries' late twins (decode_attn_long_rope_late_bf16, the
  early `_late` ones, the gated `_late` one), which let the next kernel launch once their
  K/V tiles landed instead of on entry (at batch 1 the o_proj GEMV's blocks request all of
  their weights before their wait, and that stream lands while the attention's K/V and L2
  trips are in flight). The measurements are at late_trigger_pays: since session 54 the
  ungated entries trigger on entry (gpu192: Qwen3-4B -1.6%, Qwen3-8B and Qwen3-30B-A3B -0.6%
  against the late twins).
* ATLAS_DECODE_ATTN_LONG_EARLY=0: at one sequence, the staged entry (or its late twin)
  instead of their early twins (the default since gpu62), which read everything but the qkv
  rows (kv_len, slot, position, block table, the ring's first K/V tiles, the norm weights and
  cos/sin row) before their PDL wait, under the qkv projection, and merge splits of whole
  64-key tiles (decode_attn_long_rope_early_bf16, _early_late_bf16 with the late trigger;
  ops/attention_long.early_split_rule). Measured (gpu62, 2026-12-03, batch 1, PDL on, GPU
  ms a step, early vs not, both orders where two): Qwen3-0.6B x 512 0.741 / 0.742 vs 0.751
  / 0.752, Qwen3-30B-A3B 2.813 / 2.810 vs 2.831 / 2.828, Qwen3-8B 4.258 vs 4.304 (x 4,096
  4.507 vs 4.576), Llama-3.2-1B 0.824 vs 0.840; the attention after the qkv GEMV on the
  critical path: 8.8 vs 9.1 us, 13.4 vs 13.7, 9.7 vs 11.0 (16.4 vs 18.3), 5.1 vs 6.0.
* ATLAS_DECODE_ATTN_LONG_EXACT=0: the early entries' general code (a runtime head length
  in the projections and attention sinks) for every model, instead of their _exact twins
  (decode_attn_long_rope_early_exact_bf16, _early_late_exact_bf16) where the heads are
  head_dim long and have no sinks (ops/attention_long.exact_heads): the same bits from 456
  SASS instructions fewer (9,104 -> 8,648), code every SM runs once a layer at batch 1.
  Measured (gpu128, 2026-12-05, H100, batch 1 x 512, GPU ms a step, exact / general / exact):
  Qwen3-0.6B 0.787 / 0.814 / 0.785, Qwen3-30B-A3B 3.104 / 3.164 / 3.105, Qwen3-8B 5.419 /
  5.456 / 5.424, Qwen2.5-1.5B 1.539 / 1.557 / 1.538.
* ATLAS_DECODE_ATTN_LONG_ONE_DIM=0: batch 1's early entries with both head dims' code
  (8,648 SASS instructions the exact ones) instead of their twins compiled for the launch's
  head dim alone (decode_attn_long_rope_early[_late][_exact]_d128_bf16 / _d64_bf16: ~5,200
  / ~3,600; the path a launch runs is the same code). Measured (gpu129, 2026-12-05, H100,
  batch 1 x 512, GPU ms a step, both / one / both / one, exact heads): Qwen3-0.6B 0.784 /
  0.721 / 0.787 / 0.722, Qwen3-30B-A3B 3.113 / 2.980 / 3.113 / 2.983, Qwen3-8B 5.422 / 5.366
  / 5.427 / 5.368, Llama-3.2-1B (D 64) 0.980 / 0.982 / 0.979 / 0.982; the attention after
  the qkv GEMV 7.93 -> 5.50 us a layer on 0.6B.
* ATLAS_DECODE_ATTN_LONG_GATED=1 / 0 (unset: on where the qkv projection is bf16,
  ops/attention_long.gated_pays): batch 1 of gated full attention (Qwen3.5, Qwen3-Next: D 256,
  each q head followed by its output gate, partial rotary, (1 + w) norm weights) as one
  launch, decode_attn_long_rope_early[_late]_gated_d256_bf16 (the early exact prologue doing
  qk_norm_rope_kv_partial_bf16's work, the splits merging together, each head's output gated
  as it is written: ops/attention_long.decode_attention_long_rope_gated), instead of four (the
  rope kernel, the D-256 attention, its combine, sigmoid_gate_mul_bf16). Measured slower with
  the last split merging (gpu157 / gpu161, 2026-12-06, H100, Qwen3.5-35B-A3B batch 1 x 512,
  GPU ms a step: 2.816 / 2.810 vs 2.794 / 2.795 off); with the splits merging together
  (SpreadMerge, gpu165 / gpu168) even at 512 keys and faster at 2,048 and 4,096 on bf16
  weights, slower at 512 and 16,384 on NVFP4 (gated_pays has the figures; docs/kernels.md
  the trace).
* ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=0: batches of two or more sequences on the staged
  entry with both head dims' code instead of its twins for exact heads holding one head
  dim's code (decode_attn_long_rope_staged_exact_d128_bf16 / _d64_bf16: 5,208 / 3,560 SASS
  instructions against 9,072). Measured (gpu135, 2026-12-05, H100, GPU ms a step at batch x
  1,024 keys, staged / one dim / staged / one dim): Qwen3-0.6B b8 1.396 / 1.277 / 1.394 /
  1.275, b64 4.048 / 3.871 / 4.054 / 3.872; Qwen3-8B b8 6.173 / 5.890 / 6.164 / 5.886, b64
  9.861 / 9.495 / 9.904 / 9.498 (-4 to -9%).
* ATLAS_DECODE_ATTN_LATENCY=0: decode attention as at the start of session 6 (the A/B of
  its latency paths): never the clustered kernels (the splits' partials always merge through
  global memory and the last split's ticket, splits of 32 keys and more), and the rope-fused
  kernel waiting for the qkv projection before it reads anything (decode_attn_rope_wait_bf16,
  which keeps one round ahead; decode_attn_bf16 keeps its prefetch unless
  ATLAS_DECODE_ATTN_AHEAD=0 too).
* ATLAS_DECODE_ATTN_AHEAD=0: the unclustered decode attention kernels (batches of 5+
  sequences: decode_attn_bf16, decode_attn_rope_bf16) on their twins that keep only the next
  round's K/V in flight (decode_attn_ahead1_bf16, decode_attn_rope_ahead1_bf16: the kernels
  before session 7) instead of also requesting 3 rounds ahead into L2 (decode_attn.cuh
  TableAhead); the A/B of that prefetch (gpu17: the attention's time in the batch-64 step,
  218.7 us a call, is the session-6 kernel's 216.4: not shown to win yet).
* ATLAS_DECODE_ATTN_SPLIT_MAJOR=1: the clustered decode attention kernels (batch 1..4) on
  their split-major twins (decode_attn_cluster_splitmajor_bf16, decode_attn_rope_cluster_
  splitmajor_bf16): cluster L of the grid serves head slice L % slots and splits of cluster
  L / slots, so every slice's first cluster (all the work up to 512 keys) is among the first
  the GPU starts; the default order puts a slice's idle clusters before the next slice's
  working one, and a batch-1 grid (320-512 blocks) is more than one wave of 264 (with the
  same push merge as the default kernels; it takes precedence over
  ATLAS_DECODE_ATTN_B1_CHAIN=0). Off by default until measured.
* ATLAS_DECODE_ATTN_B1_CHAIN=0: the clustered decode attention kernels (batch 1..4) on their
  session-7 twins (decode_attn_cluster_pull_bf16, decode_attn_rope_cluster_pull_bf16): each
  block merges its warps through shared memory, a cluster barrier (a gpu-scope fence in
  SASS), each block reads its peers' parts, a second cluster barrier before exit; and a
  shortest split's second K/V round requested into L2 before the PDL wait, loaded after it.
  Default (session 8): the warps push their partials into the merging blocks' shared memory
  (st.async counted on an mbarrier set up before the wait: one level, no fence, no exit
  barrier), and a shortest split's K/V (64 keys, D <= 128) is all in registers before the
  wait (decode_attn.cuh decode_push_merge, decode_whole_rounds). Measured (gpu19,
  2026-12-02, bench_decode, back to back): Qwen3-0.6B batch 1 1,010.0 tok/s vs 999.3 with
  =0 (+1.1%); every check case of both passes.
* ATLAS_DECODE_ATTN_FUSED_VERIFY=1: verification steps (several rows of one sequence) on
  the rope-fused decode kernel, each row's blocks computing the keys its earlier rows
  append (session 6). Off by default: measured 47.2 us a call vs 17.1 in a plain step on
  Qwen3-8B K=3 (gpu16, 2026-12-02), so verification rows take qk_norm_rope_kv + decode
  attention (ops.attention.rope_step_keys).
* ATLAS_DECODE_ATTN_VERIFY=0: verification steps' attention (qk_norm_rope_kv first) on
  decode attention with every row a sequence of its own (each row's blocks read the
  sequence's whole K/V again: 34.8 us a call vs 16.9 plain on Qwen3-8B K=3, gpu17) instead
  of the verification kernel (attention_verify: one read of a sequence's K/V for all its
  rows, ops/attention_verify.uses_verify). With it the runner is not row-invariant against
  plain decode steps (runner.invariant_rows is 0).
  ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH=N: the most sequences a verification step may verify
  for its attention to take the verification kernel (default DEFAULT_VERIFY_MAX_BATCH = 1);
  larger steps run rows apart. Measured (gpu20, kernel table, Qwen3-8B K = 3 at 512 keys):
  batch 8 35.05 us on the kernel vs 17.49 rows apart; batch 1 20.19 vs 20.86, at 4,096 keys
  34.27 vs 66.82. 64 restores the session-8 routing (every verification on the kernel).
  ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS=N: the fewest keys a split of the verification kernel
  takes (a multiple of 64; default 64, the session-8 rule: at 512 keys 8 one-tile splits
  merged by the last); 128 / 256: 4 / 2 splits of 2 / 4 tiles (ops/attention_verify.
  verify_split_rule), for the A/B of its fixed cost at short contexts.
  ATLAS_DECODE_ATTN_VERIFY_ROPE=1: those verification steps on the kernel's rope entry point
  (decode_attn_verify_rope_bf16: its blocks do qk_norm_rope_kv's q/k norm, RoPE and K/V
  append themselves, one launch a layer instead of two, the same bits) where the layout is
  the classic one (ops/attention_verify.rope_fits). Off by default until measured.
  ATLAS_DECODE_ATTN_VERIFY_CLUSTER=0: those verification steps (the classic layout) on
  decode_attn_verify_bf16 after qk_norm_rope_kv_bf16 (or the rope entry above) instead of
  the kernel's clustered entry point (decode_attn_verify_cluster_bf16, the default, taking
  precedence over ATLAS_DECODE_ATTN_VERIFY_ROPE): the plain batch-1 step's machinery for a
  sequence's rows, one thread-block cluster per kv head merging its blocks' partials on
  chip, each row's keys split by its own kv_len (a row's bits do not depend on the rows
  beside it), the K/V history requested before the PDL wait, qk_norm_rope_kv's work done
  by the blocks (attention_verify.cu says why decode_attn_verify_bf16 costs 2x the plain
  step's attention). Measured (gpu28, 2026-12-02, Qwen3-8B b1 K = 3 ctx 512): 26.48 us a
  call against 38.19 + 2.82, the verification step 1.164x a plain one (1.271x), bench_spec
  at p = 0.7 430.6 tok/s = 2.02x plain against 1.82x, the output equal to the reference.
  ATLAS_DECODE_ATTN_VERIFY_TILE_CLUSTERS=0: the clustered entry's m16 tiles of a piece (a
  sequence's rows x q heads: Qwen3-8B's K = 4 has two) served in turn by one cluster per kv
  head, each tile reading the K/V again from L2, instead of side by side by a cluster each
  (the default, ops/attention_verify.cluster_tile_slots). Both give every row a one-tile
  step's bits (session 12: before, a two-tile step's warps split the keys otherwise, and the
  K policy's K = 4 steps left the K = 3 reference: gpu30 acceptance 0.32 for 0.7). Unmeasured.
* ATLAS_PREFILL_ATTN_SM90=0: prefill attention never on the Hopper wgmma kernel
  (attention_sm90, head_dim 128 and 256), always on prefill_attn_bf16.
* ATLAS_PREFILL_ATTN_QREG=1: head_dim-128 prefill attention on the wgmma kernel's Q-in-
  registers entry point (prefill_attn_sm90_qreg_bf16); off by default until measured.
* ATLAS_PREFILL_ATTN_WIDE=0: head_dim-128 prefill attention on the wgmma kernel's 64-key
  tiles (prefill_attn_sm90_bf16, 4-stage ring) instead of its 128-key tile entry point
  (prefill_attn_sm90_wide_bf16: a 3-stage ring of 32 KiB tiles, half the per-tile barriers
  and ring work a key; the default since the H200 measured a 32,000-token Qwen3-8B prefill
  at 18,450 vs 17,571 tok/s, 56.2% vs 53.7% of the matmul peak, gpu26 2026-12-02).
* ATLAS_PREFILL_ATTN_SPLIT=0: wgmma prefill attention never on its split entry
  (prefill_attn_sm90_split_bf16 + prefill_attn_sm90_merge_bf16, ops/attention_sm90.split_plan:
  where the grid of one block per (q head, 128-query tile, sequence) leaves most SMs idle, a
  short chunk past a long history — the warm prefix-cache request: 24 queries over 2,064 keys
  took 64.1 us a layer on 32 blocks, gpu203 — its rows take the kv head's group of q heads
  (GQA packing) and its keys are split across the idle SMs, the partials merged by a second
  launch). ATLAS_PREFILL_ATTN_SPLIT_MIN_TILES=N: the fewest key tiles a split takes (default
  2: 256 keys at head_dim 128). Unmeasured on the device.
* ATLAS_MOE_SM90=0: the MoE grouped GEMMs on the mma.sync kernels (moe_grouped), never the
  Hopper wgmma ones (moe_grouped_sm90).
* ATLAS_MOE_GATE_UP_GEMV=0: the decode MoE gate/up projection on the session-6 column-loop
  kernel (moe_gate_up_silu_bf16) instead of the GEMV-shaped one (moe_gate_up_gemv_bf16[_single]:
  the dense single-row GEMV's loading scheme, two columns of one expert a block) at batch 1;
  ATLAS_MOE_GATE_UP_GEMV_MAX_M=N: the largest decode batch that takes the GEMV-shaped kernel
  (default 1: its batch entry keeps fewer bytes in flight per SM than the column loop).
  ATLAS_MOE_GATE_UP_GEMV_THREADS=N: the GEMV-shaped gate/up blocks' threads (a multiple of
  32, 32..256); unset, enough for two 16-byte chunks of a row each (ops/moe.py
  gate_up_gemv_threads: 128 at hidden 2048, so a thread keeps 8 loads in flight and twice the
  blocks fit an SM); 256 is the session-7 launch (gemv_threads: one chunk a thread at 2048).
* ATLAS_MOE_GATE_UP_TILED=1 / 0 (unset: ops/moe.py gate_up_tiled's wave-fill rule, session
  25): the batch-1 decode MoE gate/up on the tiled entry
  (moe_gate_up_gemv_tiles_bf16: a block takes several column pairs of its slot one after the
  other, the next pair's weights requested before the current pair's reduction, the grid one
  wave of the device's resident blocks) instead of moe_gate_up_gemv_bf16_single (two columns
  of one slot a block: 384 x 8 blocks at Qwen3-30B-A3B, ~3 waves, each block reading its
  routing before its first weight request). ATLAS_MOE_GATE_UP_TILES=N: N column pairs a block
  (unset or 0: the one-wave rule, ops/moe.py gate_up_tiles). Off by default: measured (gpu22,
  2026-12-02, with ATLAS_MOE_ROUTE_IN_EXPERTS=1) Qwen3-30B-A3B b1 312.5 tok/s vs 314.3 with
  both off, Qwen3.5-35B-A3B 394.4 vs 393.3: no gain (no per-kernel profile yet); alone on
  session 24's MoE path (gpu89, GPU ms a step, batch 1 x 512): Qwen3.5-35B-A3B 2.389 / 2.387
  vs 2.343 / 2.342 off, Qwen3-30B-A3B 2.681 vs 2.709 (one sample each: a per-shape lead);
  gpu90 (both orders, on a slower tree) Qwen3-30B-A3B 2.939 / 2.943 tiled vs 2.962 / 2.959.
  The per-kernel rows say why: on the 30B the tiled grid (3 pairs a block, 1,024 blocks: 97%
  of the 1,056 an H200 holds) gives the same gate/up time and lets the down launch start
  early (its lead 15.1 us against 3.9; the down 9.10 us after gate/up against 9.92); on the
  35B (256 pairs x 9 slots: 3 pairs a block is 774 blocks, 73% of the wave) the tiled
  gate/up itself is slower (12.25 us against 11.06). So the rule takes it where its grid
  fills at least GATE_UP_TILED_MIN_FILL of the wave. (ATLAS_MOE_ROUTE_IN_EXPERTS needs =1.)
* ATLAS_MOE_ROUTER_NORM=0: a decode MoE block's residual add + RMSNorm as an add_rmsnorm
  launch before its router instead of by the fused router launch (the default:
  moe_add_rmsnorm_gate_topk_*_bf16, moe_router.cu NormIn: every block forms the normed row
  itself from the residual and o_proj's delta, the last writes both back). Measured (PDL on,
  batch 1 x 512, GPU per step, on vs off): Qwen3.5-35B-A3B 2.479 vs 2.500 (gpu58), 2.483 /
  2.483 vs 2.504 / 2.505 (gpu59); Qwen3-30B-A3B 2.829 / 2.830 vs 2.832 / 2.831 (gpu58);
  Qwen3.5-35B-A3B NVFP4 2.531 vs 2.527 (gpu58), 2.527 vs 2.524 (gpu59). (Session 13's
  version of it lost: docs/kernels.md "Removed paths".)
* ATLAS_MOE_ROUTER_CLUSTER=0: a batch-1 decode MoE block's fused router (with the norm before
  it, ATLAS_MOE_ROUTER_NORM) on its ticket kernel (its blocks' ticket and the last block's
  re-read of the logits from L2) instead of one cluster of 16 blocks (the default:
  moe_router.cu moe_add_rmsnorm_gate_topk_cluster_*, the logits meeting in rank 0's shared
  memory behind one cluster barrier; ops/moe.py router_uses_cluster: at most 256 experts,
  where the device holds such a cluster). Measured (gpu86, 2026-12-04, batch 1 x 512, PDL
  on, GPU ms a step, ticket / cluster, both orders): Qwen3.5-35B-A3B 2.414 / 2.414 vs
  2.343 / 2.344, Qwen3-30B-A3B 2.769 / 2.769 vs 2.710 / 2.711.
* ATLAS_MOE_ROUTE_IN_EXPERTS=1 (with ATLAS_MOE_GATE_UP_TILED=1): a batch-1 decode MoE block's
  router launch writes only the logits (moe_gate_logits_bf16) and the tiled gate/up (after
  its wait) and the GEMV-shaped down (before its wait) each compute the top-k from them with
  the router's code (ops/moe.py routes_in_experts; at most 256 experts, not under expert
  parallelism, which rewrites topk_ids between the launches), instead of the router's last
  block (a ticket, then one warp's top-k into topk_ids / topk_weights). Off by default: see
  ATLAS_MOE_GATE_UP_TILED (measured together, no gain).
* ATLAS_MOE_DOWN_WAVE=0: the decode MoE down launch sized as in session 6 (whole row groups
  a block, ops/moe.py down_rows_grouped) instead of equal blocks filling one wave of every SM
  (ops/moe.py down_rows: at batch 1 of Qwen3-30B-A3B 205 blocks, some SMs with one, others
  with two, became 256 blocks of 8 rows).
* ATLAS_MOE_DOWN_GEMV=0: the decode MoE down launch on the row-group kernel above
  (moe_down_sum_bf16) instead of its GEMV-shaped twin (moe_down_gemv_sum_bf16: 4 output rows a
  block, every thread all its chunks of the block's rows in flight at once, the dense GEMV's
  scheme) where the shape allows it (inter a multiple of 256);
  ATLAS_MOE_DOWN_GEMV_MAX_M=N: the largest decode batch that takes the twin (default 1).
  Measured (gpu19, 2026-12-02): Qwen3-30B-A3B b1 315.0 tok/s with this and the two-chunk
  gate/up blocks below vs 301.5 with both back (ATLAS_MOE_DOWN_GEMV=0
  ATLAS_MOE_GATE_UP_GEMV_THREADS=256); b8 798.0 vs 797.7 (b8 takes neither).
  ATLAS_MOE_DOWN_GEMV_TILES=N: its blocks take N tiles of 4 rows each, one after the other
  (1: a block a tile, two waves at batch 1 of Qwen3-30B-A3B); unset or 0, as many as bring the
  grid to one wave of 2 blocks an SM (ops/moe.py down_gemv_rows).
  ATLAS_MOE_DOWN_ONE_STEP=0: the kernel switching between four chunk-step counts at run time
  instead of the default twin holding the shape's count's code alone (moe_down_gemv_sum_s1 ..
  _s4_bf16 by ops/moe.py down_gemv_steps: 1,104 .. 2,280 SASS instructions against 6,728;
  Qwen3-30B-A3B runs 3). Measured (gpu131, H100, GPU ms a step at batch 1 x 512, default /
  one step twice): Qwen3-30B-A3B 2.930 / 2.927, 2.921 / 2.928; Qwen3.5-35B-A3B 2.781 /
  2.779, 2.779 / 2.768; MiniMax-M2 (8 layers) 1.493 / 1.484, 1.492 / 1.484.
* ATLAS_GRAPH_STEP_IO=0: a captured decode step's input upload, carried-token copies and
  sampled-id download as copies on the stream around its graph instead of the step_io.cu
  kernels inside it, which read and write the host's mapped page-locked buffers: the three
  copies' engine hand-offs left ~20 us a step with no kernel running (gpu133, H200).
  Measured (gpu134, 2026-12-05, H100, batch 1 x 512): span between two step graphs 23.2 ->
  1.6 us; async wall a step, in-graph / copies / in-graph / copies, Qwen3-0.6B 0.720 /
  0.735 / 0.722 / 0.734 ms (now the GPU replay's 0.719), Qwen3-8B 5.273 / 5.289; the
  default server streaming 1,024 tokens to the openai SDK 1,370.1 / 1,348.4 tok/s. Greedy
  digests at batch 8, 3 and 1 identical either way.
* ATLAS_MOE_QUANT_DOWN_EARLY=1 / 0: a decode MoE block's down launch over FP8 / NVFP4 experts
  on its early twin (moe_down_sum_early_{fp8,nvfp4}: before the PDL wait each warp reads its
  token's first slots' routing into registers and requests its row's first round of expert
  weight codes and scales into L2, so that DRAM round trip overlaps the gate/up launch's
  tail; the same loads after the wait, bit for bit the same sums) / on
  moe_down_sum_{fp8,nvfp4} (the routing read and every weight requested after the wait).
  Unset: the early twin for NVFP4 experts, the plain entry for FP8 (ops/moe_quant.py
  down_early). Measured twice in each order (gpu48 / gpu49, 2026-12-03, Qwen3.5-35B-A3B
  batch 1 x 512, profile_decode.py, PDL on): NVFP4 2.548 / 2.545 ms a step on vs 2.689 /
  2.685 off (-5.2%); FP8-block 2.629 / 2.621 on vs 2.590 / 2.580 off (+1.5%).
* ATLAS_MOE_FUSED_DECODE=0: a decode MoE layer as separate launches (router GEMV, top-k,
  routed experts, the shared expert's SwiGLU / gate / add, then add_rmsnorm), not the
  three-launch fused path (model/moe.py): the A/B of the fusion, the same values.
* ATLAS_GDN_FUSED=0: a Gated-DeltaNet layer's decode step as three launches (conv1d, the
  recurrent delta rule, the gated RMSNorm) instead of the fused gdn_decode kernel.
* ATLAS_GDN_CHUNK_TC=0: the chunked (prefill) delta rule on CUDA cores only, never the
  tensor-core kernel (gated_delta_chunk_tc).
* ATLAS_GEMV_RING=0: bf16 products of 2..8 rows (a speculative verification, decode batches
  of 2..8) on the register-tiled GEMV (gemv_bf16, gemv_bf16_f32, gemv_silu_bf16) instead of
  its cp.async-ring twins (gemv_ring_*: the same sums, weights in flight through shared
  memory, ops/matmul.gemv_ring_plan). ATLAS_GEMV_RING_SINGLE=1: one row on the ring kernel
  too (off by default: the single-row kernel ran at ~90% of copy on Qwen3-8B).
  ATLAS_GEMV_RING_STAGES=2|3: the ring's tiles per thread (unset: the plan's rule).
* ATLAS_GEMV_CHUNKS=1|2: 16-byte chunks of each row a bf16 CUDA-core GEMV thread loads
  (ops/matmul.py gemv_threads; unset: 2, gemv_core's kUnroll, every load slot used: 128
  threads at k 2,048 where 1 gives 256 with half of their loads zero-filled). 1 is the A/B.
* ATLAS_GEMV_ROWS=4|8: weight rows a block of batch 1's plain bf16 GEMV (gemv_bf16_single
  or its `_x8` twin: twice the bytes a block for one launch, reduction and exit, the same
  bits) and FP8's plain convert GEMV. Unset: 4 (gpu143 / gpu144, H100: 8 lost on Qwen3-4B,
  -0.6B and the 35B's input projections).
* ATLAS_GEMV_SWIGLU_ROWS=4|8: the same for batch 1's gate_up + SwiGLU products
  (gemv_swiglu_bf16_single, gemv_fp8_cvt_swiglu_bf16_single, or their `_x8` twins). Unset:
  8 where a weight row holds ops/matmul.SWIGLU_X8_MIN_ROW_BYTES or more, else 4 (the data
  there).
* ATLAS_GEMV_LEAN=1 / 0: batch 1's plain bf16 GEMV (4-row blocks) always / never on its
  48-register twin gemv_bf16_lean_single (a block more an SM, the same bits). Unset: where
  that twin runs the launch in fewer waves of resident blocks (ops/matmul.saves_a_wave;
  gpu172: capped everywhere, Qwen3-8B +0.7% and Llama-3.2-3B +2.1% where the waves stayed;
  gpu173, by waves: Qwen3-4B -2.6%, Gemma-3-4B -2.9%, Qwen3-14B -0.9%).
* ATLAS_GEMV_SWIGLU=0: batch-1 decode of a bf16 dense MLP runs gate_up into [gate | up],
  then the SwiGLU in the down GEMV's x load (up to ops/matmul.FUSED_SILU_MAX_K) or silu_mul
  and a plain down GEMV, instead of a gate_up GEMV that ends with its SwiGLU (gemv.cu
  gemv_swiglu_bf16_single: bit for bit the same activation) and a plain down GEMV. On by
  default (gpu44, batch 1, GPU ms a step, on vs off: Qwen3-8B 4.401 vs 4.474, Llama-3.1-8B
  4.238 vs 4.284, Qwen3-1.7B 1.397 vs 1.394).
* ATLAS_GEMV_BIAS=0: batch-1 decode of a model with bf16 q/k/v biases (Qwen2) runs the qkv
  GEMV, then bias_add, instead of the GEMV that adds the bias itself (gemv.cu
  gemv_bias_bf16_single: bit for bit the same rows, one launch less a layer; the default).
  Measured (gpu128, 2026-12-05, H100, batch 1 x 512, GPU ms a step, on / off / on):
  Qwen2.5-1.5B 1.492 / 1.539 / 1.493, Qwen2.5-0.5B 0.642 / 0.670 / 0.641, Qwen2.5-7B 5.089
  / 5.163 / 5.092.
* ATLAS_MAX_SHARED_CARVEOUT (1 / 0; unset: the model's rule, `model.load`): every kernel
  asks for SMs configured with the most shared memory (GpuBackend.prefer_shared_memory,
  CUDA's carveout preference), not only the ones whose blocks need it (the long-context
  decode attention, the persistent decode kernel). Why: an SM changes its L1 / shared-memory
  split only when it is empty, so where a kernel with ~100 KiB blocks follows one the driver
  ran on a small carveout (the GEMVs' 1 KiB), its blocks can start on an SM only once every
  block of the one before has left it, and PDL's overlap is lost there. Unset, it is on for
  models whose every layer is full attention and off for hybrids (Gated-DeltaNet layers).
  Measured (gpu52, 2026-12-03, batch 1 x 512, PDL on, GPU ms a step, on vs off, both
  orders): Qwen3-30B-A3B 2.935 / 2.935 vs 3.036 / 3.034, Qwen3-8B 4.346 vs 4.415, Qwen3-0.6B
  0.776 vs 0.793, Qwen3-8B batch 64 7.345 vs 7.354; Qwen3.5-35B-A3B 2.582 / 2.578 vs
  2.518 / 2.519 (its GDN decode row 9.64 vs 8.68 us a call, MoE gate/up 18.44 vs 17.45:
  kernels that lose L1), NVFP4 2.556 vs 2.524.
* ATLAS_GEMV_ATTN_GATE=1: batch-1 decode of gated full attention (Qwen3.5, Qwen3-Next) has
  the o_proj GEMV compute the output gate on its x load (gemv.cu gemv_attn_gate_bf16_single:
  the same bits, one launch fewer a full-attention layer) instead of sigmoid_gate_mul, then
  the bf16 o_proj GEMV. Off by default: measured slower (Qwen3.5-35B-A3B batch 1, GPU ms a
  step, gpu44 2.549 vs 2.512 off, gpu45 in the other order 2.557 vs 2.521; gpu89, session
  24's MoE path, 2.371 / 2.370 vs 2.343 / 2.342).
* ATLAS_PERSISTENT_DECODE=1: a batch-1 decode step of a dense bf16 model runs its
  transformer layers as one persistent kernel (ops/decode_persistent.py) instead of ~7
  launches a layer; models it does not cover keep the per-op path. Off by default until
  measured (tools/gpu/run_suite.sh persistent_ab). ATLAS_PERSISTENT_PREFETCH_KB=N: the
  KiB of its next weight phase each block asks L2 for before a barrier (default
  DEFAULT_PERSISTENT_PREFETCH_KB; 0: none), for sweeps on the device;
  ATLAS_PERSISTENT_STAGE=0: none of its weight phases bulk-copied into shared memory ahead
  (ops/decode_persistent.stage_plan), every one streamed after that L2 prefetch;
  ATLAS_PERSISTENT_BLOCKS=N: its grid (default 0: one block per SM; fewer for sweeps of the
  barrier cost against the blocks streaming weights); ATLAS_PERSISTENT_SPLITS=N: its key
  splits a q head (default 0: SM count / q heads; at most the step's partial buffers).
  ATLAS_PERSISTENT_FLAGS=0: its phases separated by device-wide barriers (five a layer,
  the session-7 schedule: 2.4-3.6 us each at gpu17) instead of per-layer readiness counts
  (a block waits only for the blocks that wrote what it reads: an attention item for its
  head's qkv rows, and only when it has rows of the phase). Measured (gpu22, 2026-12-02,
  bench_moe synthetic Qwen3-0.6B batch 1): counts 979.3 tok/s, barriers 915.4 (+7%), the
  per-op default 1,026.4 (so ATLAS_PERSISTENT_DECODE stays off).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

#: Fewest rows routed to the batched GEMV (tensor cores) where it is available: below it the
#: CUDA-core GEMV, which keeps up to 8 rows in registers but turns FMA-bound past 2. Measured
#: on the H200 (GPU ms a decode step x 512 keys, graph replay, PDL on, gemv_mma from 2 rows
#: against the CUDA-core GEMV up to 7; bench/results/2026-12-04-gpu109, -gpu110): Qwen3-8B
#: batch 2 4.972 vs 4.635, batch 3 4.830 vs 5.444, 4 4.908 vs 5.729, 6 4.723 vs 6.226;
#: Qwen3-0.6B batch 3 1.040 vs 1.082, 4 1.108 vs 1.223, 6 1.078 vs 1.493; Qwen3-30B-A3B batch
#: 4 6.712 vs 6.821. (2026-11-30 had set 8: batch 4 slower on gemv_mma, before its later
#: work.)
DEFAULT_BATCHED_GEMV_MIN_M = 3

#: rows a block of a many-row plain launch (a prefill's first and final norms) loops over:
#: gpu141 (H200, 2,048 rows of 4,096) timed 1 / 2 / 3 / 4 / 8 / 16 rows at 14.31 / 14.29 /
#: 12.79 / 13.26 / 17.80 / 28.22 us (PyTorch 11.5): at 1 and 2 every block is resident at once
#: and all load, then all store, in step; at 8 and more too few blocks keep loads in flight
DEFAULT_NORM_ROWS_PER_BLOCK = 3

#: The FP8 tensor-core decode GEMM's ring slots and persistent blocks an SM
#: (gemm_decode_fp8.cu; ops/matmul_fp8_wgmma.smem_bytes): 9 slots and two blocks are the
#: sessions 56-57 form (112 KB a block), whose projections each beat the convert GEMV alone on
#: the H200 while the step lost (gpu201: the attention and o_proj PDL launches beside it found
#: no room on its SMs). gpu203 (H100) swept 3..12 slots x 1..3 blocks: a shallow ring gives
#: the attention its room back and costs the projections as much; no depth won there, so
#: these stay until the H200 sweep (bench/results/next-gpu-call/ring.sh).
DEFAULT_FP8_WGMMA_STAGES = 9
DEFAULT_FP8_WGMMA_SM_BLOCKS = 2

#: Row range of the skinny wgmma GEMM (gemm_decode_sm90) where the loaded set has it: from just
#: past the CUDA-core GEMV's 8 rows to its widest wgmma N. Unmeasured against gemv_mma (9..64)
#: and the GEMMs (65..256) when set: A/B with the switches above (tools/gpu/run_suite.sh).
DEFAULT_DECODE_GEMM_MIN_M = 9
DEFAULT_DECODE_GEMM_MAX_M = 256
#: k-tiles of a decode GEMM block's weight rows kept prefetched into L2 ahead of its ring
#: (gemm_decode_sm90.cu; 8 = 8 x 128 bytes a row, 64 KiB a one-warpgroup block). Off: on the
#: H200 (gpu17, 2026-12-02) Qwen3-8B batch-64 decode fell from 6,649 (gpu14) to 5,791 tok/s
#: with 8 here, the split-4 GEMMs from 57 to 78 us a call in the batch-64 profile (the
#: decode attention's time there did not change); opt in with ATLAS_DECODE_GEMM_L2_TILES=8.
DEFAULT_DECODE_GEMM_L2_TILES = 0
#: block tables reaching this many keys route decode attention to the long-context kernel
#: (ops/attention_long.LONG_CONTEXT_KEYS, restated here: routes import no ops module)
DEFAULT_DECODE_ATTN_LONG_MIN_KEYS = 16384
#: decode launches of this many sequences or more take the long-context kernel at any
#: context (ops/attention_long.py says why: gpu32 measured batches 2 and 4 11-25% faster a
#: step on the long kernel; gpu34 batch 1, Qwen3-8B x 512 / 1,536 keys -3.4% / -8.1%,
#: Qwen3-0.6B x 512 -8.5%, Qwen3.5-35B-A3B -1.7%: every batch since session 13; a
#: speculating runner's verification steps stay on the verification kernel, docs/kernels.md
#: "Removed paths")
DEFAULT_DECODE_ATTN_LONG_MIN_BATCH = 1
#: the launches with an *_early_* entry point (ops/early_trigger.py): the residual add +
#: RMSNorm, the SwiGLU before the down projection, the long attention's split combine and
#: the attention output gate
EARLY_TRIGGER_KINDS = ("norm", "silu", "combine", "gate")
#: tensor-core decode launches of at most this many sequences merge their splits in their
#: last split instead of a combine launch (ATLAS_DECODE_ATTN_LONG_MERGE unset): batch 1 since
#: session 18, batches of up to 8 since gpu106 (2026-12-04, batch 8 x 512, GPU ms a step,
#: merged / combine: Qwen3-8B 4.793 / 4.858, Qwen3-0.6B 1.158 / 1.164, Qwen3-30B-A3B 11.162 /
#: 11.187)
DEFAULT_DECODE_ATTN_LONG_MERGE_MAX_SEQS = 8
#: verification steps of at most this many sequences attend on the verification kernel,
#: larger ones rows apart (ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH; the module docstring says why)
DEFAULT_VERIFY_MAX_BATCH = 1
#: KiB of the next weight phase a persistent decode block prefetches into L2 before a barrier:
#: all of a Qwen3-0.6B phase's slice (<= 64 KB), ~8.4 MB over 132 SMs at most (L2: 50 MB)
DEFAULT_PERSISTENT_PREFETCH_KB = 64
#: the cluster splits gemm_decode_sm90 is compiled for
DECODE_GEMM_SPLITS = (1, 2, 4, 8)
#: the cluster splits gemm_decode_tma is compiled for: every portable cluster size
DECODE_GEMM_TMA_SPLITS = (1, 2, 3, 4, 5, 6, 7, 8)
#: the ring depths the ring GEMV takes (gemv_ring.cuh: 2..kRingMaxStages)
GEMV_RING_STAGES = (2, 3)


def _env_count(env: Mapping[str, str], name: str, default: int) -> int:
    """A count the environment may override; a malformed value is a ValueError naming it."""
    value = env.get(name, "").strip()
    if value and not value.isdigit():
        raise ValueError(f"{name}={value!r} is not a row count")
    return int(value) if value else default


def _env_bounded(env: Mapping[str, str], name: str, default: int, most: int, why: str) -> int:
    """A count the environment may set within 1..most (`why` names the bound), else default."""
    value = _env_count(env, name, default)
    if not 1 <= value <= most:
        raise ValueError(f"{name}={value} is outside 1..{most} ({why})")
    return value


def env_switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """A kernel-path switch the environment may override (NAME=0 or 1), for A/B runs."""
    value = env.get(name, "").strip().lower()
    return default if not value else value not in ("0", "false", "off", "no")


def _env_tristate(env: Mapping[str, str], name: str) -> bool | None:
    """NAME=1 / 0 forces a path on / off; unset leaves the launch builder's rule (None)."""
    value = env.get(name, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{name}={value!r} must be 0, 1 or unset")
    return {"1": True, "0": False}.get(value)


def _env_kinds(env: Mapping[str, str], name: str, kinds: tuple[str, ...]
               ) -> frozenset[str] | None:
    """NAME=all / none / a comma list of `kinds` forces that set; unset leaves the launch
    builders' rule (None); an unknown kind is a ValueError naming it."""
    value = env.get(name, "").strip().lower()
    if not value:
        return None
    if value in ("all", "none"):
        return frozenset(kinds if value == "all" else ())
    chosen = frozenset(v.strip() for v in value.split(",") if v.strip())
    unknown = sorted(chosen - set(kinds))
    if unknown:
        raise ValueError(f"{name}={value!r}: unknown {', '.join(unknown)} "
                         f"(all, none or a list of {', '.join(kinds)})")
    return chosen


@dataclass(frozen=True, slots=True)
class KernelRoutes:
    """Which kernel paths the launch builders may take (defaults: every path on)."""

    gemm_sm90: bool = True
    gemm_tma: bool = True
    gemm_tma_multicast: bool = False
    gemm_swiglu: bool = True
    gemm_tma_persistent: bool = False
    batched_gemv: bool = True
    batched_gemv_min_m: int = DEFAULT_BATCHED_GEMV_MIN_M
    gemv_mma_wide: bool | None = None
    moe_sm90: bool = True
    moe_fused_decode: bool = True
    moe_gate_up_gemv: bool = True
    moe_gate_up_gemv_max_m: int = 1
    moe_gate_up_gemv_threads: int = 0
    moe_gate_up_tiled: bool | None = None
    moe_gate_up_tiles: int = 0
    moe_route_in_experts: bool = False
    moe_router_norm: bool = True
    moe_router_cluster: bool = True
    moe_down_wave: bool = True
    moe_down_gemv: bool = True
    moe_down_gemv_max_m: int = 1
    moe_down_gemv_tiles: int = 0
    moe_down_one_step: bool = True
    graph_step_io: bool = True
    moe_quant_down_early: bool | None = None
    gdn_fused: bool = True
    gdn_chunk_tc: bool = True
    quant_mma: bool = True
    quant_direct: bool | None = None
    quant_e2m1_lut: bool = False
    quant_persistent: bool = False
    quant_blocks_per_sm: int | None = None
    quant_staged: bool | None = None
    quant_tile_loop: bool | None = None
    quant_narrow: int | None = None
    quant_fp8_core: bool | None = None
    quant_fp8_core_swiglu: bool | None = None
    quant_nvfp4_h2: bool | None = None
    quant_h2_rows: int | None = None
    quant_fp8_h2: bool | None = None
    quant_fp8_wgmma: bool = False
    quant_fp8_wgmma_stages: int = DEFAULT_FP8_WGMMA_STAGES
    quant_fp8_wgmma_sm_blocks: int = DEFAULT_FP8_WGMMA_SM_BLOCKS
    early_trigger: frozenset[str] | None = None
    norm_rows_per_block: int = DEFAULT_NORM_ROWS_PER_BLOCK
    norm_late: bool | None = None
    embed_norm: bool = True
    decode_gemm: bool = True
    decode_gemm_min_m: int = DEFAULT_DECODE_GEMM_MIN_M
    decode_gemm_max_m: int = DEFAULT_DECODE_GEMM_MAX_M
    decode_gemm_split: int | None = None
    decode_gemm_wide: bool | None = None
    decode_gemm_swiglu: bool = True
    decode_gemm_l2_tiles: int = DEFAULT_DECODE_GEMM_L2_TILES
    decode_gemm_tma: bool = True
    decode_gemm_occupancy: bool = True
    decode_gemm_any_split: bool = False
    decode_gemm_tune: bool = True
    decode_gemm_persistent: bool = True
    decode_gemm_streamk: bool = True
    decode_attn_long: bool = True
    decode_attn_long_min_keys: int = DEFAULT_DECODE_ATTN_LONG_MIN_KEYS
    decode_attn_long_min_batch: int = DEFAULT_DECODE_ATTN_LONG_MIN_BATCH
    decode_attn_long_merge: bool | None = None
    decode_attn_long_staged: bool = True
    decode_attn_long_late_trigger: bool | None = None
    decode_attn_long_early: bool = True
    decode_attn_long_exact: bool = True
    decode_attn_long_one_dim: bool = True
    decode_attn_long_batched_one_dim: bool = True
    decode_attn_long_gated: bool | None = None
    decode_attn_latency: bool = True
    decode_attn_ahead: bool = True
    decode_attn_split_major: bool = False
    decode_attn_b1_chain: bool = True
    decode_attn_fused_verify: bool = False
    decode_attn_verify: bool = True
    decode_attn_verify_max_batch: int = DEFAULT_VERIFY_MAX_BATCH
    decode_attn_verify_min_keys: int = 64
    decode_attn_verify_rope: bool = False
    decode_attn_verify_cluster: bool = True
    decode_attn_verify_tile_clusters: bool = True
    prefill_attn_sm90: bool = True
    prefill_attn_qreg: bool = False
    prefill_attn_wide: bool = True
    prefill_attn_split: bool = True
    prefill_attn_split_min_tiles: int = 2
    gemv_ring: bool = True
    gemv_ring_single: bool = False
    gemv_ring_stages: int | None = None
    gemv_chunks: int = 2
    gemv_rows: int = 4
    gemv_swiglu_rows: int | None = None
    gemv_lean: bool | None = None
    gemv_swiglu: bool = True
    gemv_bias: bool = True
    gemv_attn_gate: bool = False
    max_shared_carveout: bool | None = None
    persistent_decode: bool = False
    persistent_prefetch_kb: int = DEFAULT_PERSISTENT_PREFETCH_KB
    persistent_stage: bool = True
    persistent_blocks: int = 0
    persistent_splits: int = 0
    persistent_flags: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "KernelRoutes":
        """The switches in the module docstring; a malformed value is a ValueError naming it."""
        env = os.environ if env is None else env
        wide = env.get("ATLAS_GEMV_MMA_WIDE", "").strip()
        if wide not in ("", "0", "1"):
            raise ValueError(f"ATLAS_GEMV_MMA_WIDE={wide!r} must be 0, 1 or unset")
        ring_stages = env.get("ATLAS_GEMV_RING_STAGES", "").strip()
        if ring_stages and ring_stages not in {str(s) for s in GEMV_RING_STAGES}:
            raise ValueError(f"ATLAS_GEMV_RING_STAGES={ring_stages!r} must be one of "
                             f"{GEMV_RING_STAGES} or unset")
        gemv_rows = env.get("ATLAS_GEMV_ROWS", "").strip() or "4"
        if gemv_rows not in ("4", "8"):
            raise ValueError(f"ATLAS_GEMV_ROWS={gemv_rows!r} must be 4, 8 or unset")
        swiglu_rows = env.get("ATLAS_GEMV_SWIGLU_ROWS", "").strip()
        if swiglu_rows not in ("", "4", "8"):
            raise ValueError(f"ATLAS_GEMV_SWIGLU_ROWS={swiglu_rows!r} must be 4, 8 or unset")
        gemv_chunks = env.get("ATLAS_GEMV_CHUNKS", "").strip() or "2"
        if gemv_chunks not in ("1", "2"):
            raise ValueError(f"ATLAS_GEMV_CHUNKS={gemv_chunks!r} must be 1, 2 or unset")
        h2_rows = env.get("ATLAS_QUANT_H2_ROWS", "").strip()
        if h2_rows and h2_rows not in ("4", "8"):
            raise ValueError(f"ATLAS_QUANT_H2_ROWS={h2_rows!r} must be 4, 8 or unset")
        split = env.get("ATLAS_DECODE_GEMM_SPLIT", "").strip()
        if split and split not in {str(s) for s in DECODE_GEMM_TMA_SPLITS}:
            raise ValueError(f"ATLAS_DECODE_GEMM_SPLIT={split!r} must be one of "
                             f"{DECODE_GEMM_TMA_SPLITS} or unset")
        per_sm = env.get("ATLAS_QUANT_BLOCKS_PER_SM", "").strip()
        if per_sm not in ("", "1", "2", "3", "4"):
            raise ValueError(f"ATLAS_QUANT_BLOCKS_PER_SM={per_sm!r} must be 1..4 or unset")
        narrow = env.get("ATLAS_QUANT_NARROW", "").strip()
        if narrow not in ("", "0", "1", "2"):
            raise ValueError(f"ATLAS_QUANT_NARROW={narrow!r} must be 0, 1, 2 or unset")
        gate_up_threads = _env_count(env, "ATLAS_MOE_GATE_UP_GEMV_THREADS", 0)
        if gate_up_threads and (gate_up_threads % 32 or not 32 <= gate_up_threads <= 256):
            raise ValueError(f"ATLAS_MOE_GATE_UP_GEMV_THREADS={gate_up_threads} must be a "
                             f"multiple of 32 in 32..256 or unset")
        verify_min_keys = _env_count(env, "ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS", 64)
        if verify_min_keys < 64 or verify_min_keys % 64:
            raise ValueError(f"ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS={verify_min_keys} must be a "
                             f"positive multiple of 64")
        return cls(gemm_sm90=env_switch(env, "ATLAS_GEMM_SM90", True),
                   gemm_tma=env_switch(env, "ATLAS_GEMM_TMA", True),
                   gemm_tma_multicast=env_switch(env, "ATLAS_GEMM_TMA_MULTICAST", False),
                   gemm_swiglu=env_switch(env, "ATLAS_GEMM_SWIGLU", True),
                   gemm_tma_persistent=env_switch(env, "ATLAS_GEMM_TMA_PERSISTENT", False),
                   batched_gemv=env_switch(env, "ATLAS_BATCHED_GEMV", True),
                   batched_gemv_min_m=_env_count(env, "ATLAS_BATCHED_GEMV_MIN_M",
                                                 DEFAULT_BATCHED_GEMV_MIN_M),
                   gemv_mma_wide={"1": True, "0": False}.get(wide),
                   moe_sm90=env_switch(env, "ATLAS_MOE_SM90", True),
                   moe_fused_decode=env_switch(env, "ATLAS_MOE_FUSED_DECODE", True),
                   moe_gate_up_gemv=env_switch(env, "ATLAS_MOE_GATE_UP_GEMV", True),
                   moe_gate_up_gemv_max_m=_env_count(env, "ATLAS_MOE_GATE_UP_GEMV_MAX_M", 1),
                   moe_gate_up_gemv_threads=gate_up_threads,
                   moe_gate_up_tiled=_env_tristate(env, "ATLAS_MOE_GATE_UP_TILED"),
                   moe_gate_up_tiles=_env_count(env, "ATLAS_MOE_GATE_UP_TILES", 0),
                   moe_route_in_experts=env_switch(env, "ATLAS_MOE_ROUTE_IN_EXPERTS", False),
                   moe_router_norm=env_switch(env, "ATLAS_MOE_ROUTER_NORM", True),
                   moe_router_cluster=env_switch(env, "ATLAS_MOE_ROUTER_CLUSTER", True),
                   moe_down_wave=env_switch(env, "ATLAS_MOE_DOWN_WAVE", True),
                   moe_down_gemv=env_switch(env, "ATLAS_MOE_DOWN_GEMV", True),
                   moe_down_gemv_max_m=_env_count(env, "ATLAS_MOE_DOWN_GEMV_MAX_M", 1),
                   moe_down_gemv_tiles=_env_count(env, "ATLAS_MOE_DOWN_GEMV_TILES", 0),
                   moe_down_one_step=env_switch(env, "ATLAS_MOE_DOWN_ONE_STEP", True),
                   graph_step_io=env_switch(env, "ATLAS_GRAPH_STEP_IO", True),
                   moe_quant_down_early=_env_tristate(env, "ATLAS_MOE_QUANT_DOWN_EARLY"),
                   gdn_fused=env_switch(env, "ATLAS_GDN_FUSED", True),
                   gdn_chunk_tc=env_switch(env, "ATLAS_GDN_CHUNK_TC", True),
                   quant_mma=env_switch(env, "ATLAS_QUANT_MMA", True),
                   quant_direct=_env_tristate(env, "ATLAS_QUANT_DIRECT"),
                   quant_e2m1_lut=env_switch(env, "ATLAS_QUANT_E2M1_LUT", False),
                   quant_persistent=env_switch(env, "ATLAS_QUANT_PERSISTENT", False),
                   quant_blocks_per_sm=int(per_sm) if per_sm else None,
                   quant_staged=_env_tristate(env, "ATLAS_QUANT_STAGED"),
                   quant_tile_loop=_env_tristate(env, "ATLAS_QUANT_TILE_LOOP"),
                   quant_narrow=int(narrow) if narrow else None,
                   quant_fp8_core=_env_tristate(env, "ATLAS_QUANT_FP8_CORE"),
                   quant_fp8_core_swiglu=_env_tristate(env, "ATLAS_QUANT_FP8_CORE_SWIGLU"),
                   quant_nvfp4_h2=_env_tristate(env, "ATLAS_QUANT_NVFP4_H2"),
                   quant_h2_rows=int(h2_rows) if h2_rows else None,
                   quant_fp8_h2=_env_tristate(env, "ATLAS_QUANT_FP8_H2"),
                   quant_fp8_wgmma=env_switch(env, "ATLAS_QUANT_FP8_WGMMA", False),
                   quant_fp8_wgmma_stages=_env_bounded(
                       env, "ATLAS_QUANT_FP8_WGMMA_STAGES", DEFAULT_FP8_WGMMA_STAGES, 16,
                       "the FP8 tensor-core GEMM's ring slots, at least 2"),
                   quant_fp8_wgmma_sm_blocks=_env_bounded(
                       env, "ATLAS_QUANT_FP8_WGMMA_SM_BLOCKS", DEFAULT_FP8_WGMMA_SM_BLOCKS, 4,
                       "its persistent grid's blocks an SM"),
                   early_trigger=_env_kinds(env, "ATLAS_EARLY_TRIGGER", EARLY_TRIGGER_KINDS),
                   norm_rows_per_block=_env_bounded(env, "ATLAS_NORM_ROWS_PER_BLOCK",
                                                    DEFAULT_NORM_ROWS_PER_BLOCK, 16,
                                                    "a block's rows of a prefill norm"),
                   norm_late=_env_tristate(env, "ATLAS_NORM_LATE"),
                   embed_norm=env_switch(env, "ATLAS_EMBED_NORM", True),
                   decode_gemm=env_switch(env, "ATLAS_DECODE_GEMM", True),
                   decode_gemm_min_m=_env_count(env, "ATLAS_DECODE_GEMM_MIN_M",
                                                DEFAULT_DECODE_GEMM_MIN_M),
                   decode_gemm_max_m=_env_count(env, "ATLAS_DECODE_GEMM_MAX_M",
                                                DEFAULT_DECODE_GEMM_MAX_M),
                   decode_gemm_split=int(split) if split else None,
                   decode_gemm_wide=_env_tristate(env, "ATLAS_DECODE_GEMM_WIDE"),
                   decode_gemm_swiglu=env_switch(env, "ATLAS_DECODE_GEMM_SWIGLU", True),
                   decode_gemm_l2_tiles=_env_count(env, "ATLAS_DECODE_GEMM_L2_TILES",
                                                   DEFAULT_DECODE_GEMM_L2_TILES),
                   decode_gemm_tma=env_switch(env, "ATLAS_DECODE_GEMM_TMA", True),
                   decode_gemm_occupancy=env_switch(env, "ATLAS_DECODE_GEMM_OCCUPANCY", True),
                   decode_gemm_any_split=env_switch(env, "ATLAS_DECODE_GEMM_ANY_SPLIT", False),
                   decode_gemm_tune=env_switch(env, "ATLAS_DECODE_GEMM_TUNE", True),
                   decode_gemm_persistent=env_switch(env, "ATLAS_DECODE_GEMM_PERSISTENT",
                                                     True),
                   decode_gemm_streamk=env_switch(env, "ATLAS_DECODE_GEMM_STREAMK", True),
                   decode_attn_long=env_switch(env, "ATLAS_DECODE_ATTN_LONG", True),
                   decode_attn_long_min_keys=_env_count(env, "ATLAS_DECODE_ATTN_LONG_MIN_KEYS",
                                                        DEFAULT_DECODE_ATTN_LONG_MIN_KEYS),
                   decode_attn_long_min_batch=_env_count(
                       env, "ATLAS_DECODE_ATTN_LONG_MIN_BATCH",
                       DEFAULT_DECODE_ATTN_LONG_MIN_BATCH),
                   decode_attn_long_merge=_env_tristate(env, "ATLAS_DECODE_ATTN_LONG_MERGE"),
                   decode_attn_long_staged=env_switch(env, "ATLAS_DECODE_ATTN_LONG_STAGED",
                                                      True),
                   decode_attn_long_late_trigger=_env_tristate(
                       env, "ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER"),
                   decode_attn_long_early=env_switch(env, "ATLAS_DECODE_ATTN_LONG_EARLY",
                                                     True),
                   decode_attn_long_exact=env_switch(env, "ATLAS_DECODE_ATTN_LONG_EXACT",
                                                     True),
                   decode_attn_long_one_dim=env_switch(env, "ATLAS_DECODE_ATTN_LONG_ONE_DIM",
                                                       True),
                   decode_attn_long_batched_one_dim=env_switch(
                       env, "ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM", True),
                   decode_attn_long_gated=_env_tristate(env, "ATLAS_DECODE_ATTN_LONG_GATED"),
                   decode_attn_latency=env_switch(env, "ATLAS_DECODE_ATTN_LATENCY", True),
                   decode_attn_ahead=env_switch(env, "ATLAS_DECODE_ATTN_AHEAD", True),
                   decode_attn_split_major=env_switch(env, "ATLAS_DECODE_ATTN_SPLIT_MAJOR",
                                                      False),
                   decode_attn_b1_chain=env_switch(env, "ATLAS_DECODE_ATTN_B1_CHAIN", True),
                   decode_attn_fused_verify=env_switch(env, "ATLAS_DECODE_ATTN_FUSED_VERIFY",
                                                       False),
                   decode_attn_verify=env_switch(env, "ATLAS_DECODE_ATTN_VERIFY", True),
                   decode_attn_verify_max_batch=_env_count(
                       env, "ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH", DEFAULT_VERIFY_MAX_BATCH),
                   decode_attn_verify_min_keys=verify_min_keys,
                   decode_attn_verify_rope=env_switch(env, "ATLAS_DECODE_ATTN_VERIFY_ROPE",
                                                      False),
                   decode_attn_verify_cluster=env_switch(
                       env, "ATLAS_DECODE_ATTN_VERIFY_CLUSTER", True),
                   decode_attn_verify_tile_clusters=env_switch(
                       env, "ATLAS_DECODE_ATTN_VERIFY_TILE_CLUSTERS", True),
                   prefill_attn_sm90=env_switch(env, "ATLAS_PREFILL_ATTN_SM90", True),
                   prefill_attn_qreg=env_switch(env, "ATLAS_PREFILL_ATTN_QREG", False),
                   prefill_attn_wide=env_switch(env, "ATLAS_PREFILL_ATTN_WIDE", True),
                   prefill_attn_split=env_switch(env, "ATLAS_PREFILL_ATTN_SPLIT", True),
                   prefill_attn_split_min_tiles=_env_bounded(
                       env, "ATLAS_PREFILL_ATTN_SPLIT_MIN_TILES", 2, 64,
                       "key tiles a split of the short-chunk prefill attention takes at least"),
                   gemv_ring=env_switch(env, "ATLAS_GEMV_RING", True),
                   gemv_ring_single=env_switch(env, "ATLAS_GEMV_RING_SINGLE", False),
                   gemv_ring_stages=int(ring_stages) if ring_stages else None,
                   gemv_chunks=int(gemv_chunks),
                   gemv_rows=int(gemv_rows),
                   gemv_swiglu_rows=int(swiglu_rows) if swiglu_rows else None,
                   gemv_lean=_env_tristate(env, "ATLAS_GEMV_LEAN"),
                   gemv_swiglu=env_switch(env, "ATLAS_GEMV_SWIGLU", True),
                   gemv_bias=env_switch(env, "ATLAS_GEMV_BIAS", True),
                   max_shared_carveout=_env_tristate(env, "ATLAS_MAX_SHARED_CARVEOUT"),
                   gemv_attn_gate=env_switch(env, "ATLAS_GEMV_ATTN_GATE", False),
                   persistent_decode=env_switch(env, "ATLAS_PERSISTENT_DECODE", False),
                   persistent_prefetch_kb=_env_count(env, "ATLAS_PERSISTENT_PREFETCH_KB",
                                                     DEFAULT_PERSISTENT_PREFETCH_KB),
                   persistent_stage=env_switch(env, "ATLAS_PERSISTENT_STAGE", True),
                   persistent_blocks=_env_count(env, "ATLAS_PERSISTENT_BLOCKS", 0),
                   persistent_splits=_env_count(env, "ATLAS_PERSISTENT_SPLITS", 0),
                   persistent_flags=env_switch(env, "ATLAS_PERSISTENT_FLAGS", True))
