// Twins of the decode attention kernels (decode_attn.cuh) that the engine does not launch by
// default, in a module of their own (so the engine's attention module is the same PTX with or
// without them, and JITs no larger): the phase-traced ones (TracePhase) for
// tools/gpu/trace_decode_attn.py.
#include "decode_attn.cuh"

// The phase-traced twins (tools/gpu/trace_decode_attn.py): decode_attn_rope_bf16,
// decode_attn_rope_cluster_bf16 and decode_attn_cluster_bf16 with PhaseTrace, stamping
// u64 trace[block][kTraceWords] (block = (z * gridDim.y + y) * gridDim.x + x; zero the buffer
// first: a phase a block never reaches keeps its zero). Same results, same launch rules.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_rope_trace_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                const int* positions, const int* slots, const int* block_tables,
                                const int* kv_lens, float* part_o, float* part_ml,
                                unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                                uint32_t hq, uint32_t hkv, uint32_t head_dim,
                                uint32_t block_size, uint32_t max_blocks, uint32_t num_splits,
                                float scale, float eps, unsigned long long* trace) {
  decode_attn_roped<false, true, kDecodeAheadRounds, PhaseTrace>(qkv, k_cache, v_cache, q_norm_w,
                                                                 k_norm_w, cos_sin, positions,
                                                                 slots, block_tables, kv_lens,
                                                                 part_o, part_ml, counters, out, hq,
                                                                 hkv, head_dim, block_size,
                                                                 max_blocks, num_splits, scale, eps,
                                                                 kNoCluster, trace);
}

extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_rope_cluster_trace_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                        __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                        const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                        const int* positions, const int* slots,
                                        const int* block_tables, const int* kv_lens,
                                        float* part_o, float* part_ml, unsigned* counters,
                                        __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                                        uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                                        uint32_t max_blocks, uint32_t num_splits, float scale,
                                        float eps, unsigned long long* trace) {
  __shared__ atlas::PushScratch mine;
  decode_attn_roped<true, true, 1, PhaseTrace>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                               positions, slots, block_tables, kv_lens, part_o,
                                               part_ml, counters, out, hq, hkv, head_dim,
                                               block_size, max_blocks, num_splits, scale, eps,
                                               &mine, trace);
}

extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_cluster_trace_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                   const __nv_bfloat16* v_cache, const int* block_tables,
                                   const int* kv_lens, float* part_o, float* part_ml,
                                   unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                                   uint32_t hq, uint32_t hkv, uint32_t head_dim,
                                   uint32_t block_size, uint32_t max_blocks,
                                   uint32_t num_splits, float scale,
                                   unsigned long long* trace) {
  __shared__ atlas::PushScratch mine;
  decode_attn_cached<true, 1, PhaseTrace>(q, k_cache, v_cache, block_tables, kv_lens, part_o,
                                          part_ml, counters, out, hq, hkv, head_dim, block_size,
                                          max_blocks, num_splits, scale, &mine, trace);
}

// decode_attn_bf16 and decode_attn_rope_bf16 with the block-table entries one round ahead
// and no K/V prefetch in the loop (TableAhead<1>: the kernels before session 7), the A/B of
// their L2 prefetch ahead of the register loads (ops/routes ATLAS_DECODE_ATTN_AHEAD=0).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_ahead1_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                            const __nv_bfloat16* v_cache, const int* block_tables,
                            const int* kv_lens, float* part_o, float* part_ml,
                            unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                            uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                            uint32_t max_blocks, uint32_t num_splits, float scale) {
  decode_attn_cached<false, 1, NoTrace>(q, k_cache, v_cache, block_tables, kv_lens, part_o,
                                        part_ml, counters, out, hq, hkv, head_dim, block_size,
                                        max_blocks, num_splits, scale, kNoCluster);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_rope_ahead1_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                 __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                 const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                 const int* positions, const int* slots,
                                 const int* block_tables, const int* kv_lens, float* part_o,
                                 float* part_ml, unsigned* counters, __nv_bfloat16* out,
                                 uint32_t num_seqs, uint32_t hq, uint32_t hkv,
                                 uint32_t head_dim, uint32_t block_size, uint32_t max_blocks,
                                 uint32_t num_splits, float scale, float eps) {
  decode_attn_roped<false, true, 1, NoTrace>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                             positions, slots, block_tables, kv_lens, part_o,
                                             part_ml, counters, out, hq, hkv, head_dim,
                                             block_size, max_blocks, num_splits, scale, eps,
                                             kNoCluster);
}

// decode_attn_cluster_bf16 and decode_attn_rope_cluster_bf16 with the clusters taken
// split-major (HeadSlice kSplitMajor: every head slice's first cluster among the first
// started), the A/B of that order (ops/routes ATLAS_DECODE_ATTN_SPLIT_MAJOR=1); the same push
// merge (a cluster's blocks are still consecutive splits, rank = split % kClusterSplits).
extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_cluster_splitmajor_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                        const __nv_bfloat16* v_cache, const int* block_tables,
                                        const int* kv_lens, float* part_o, float* part_ml,
                                        unsigned* counters, __nv_bfloat16* out,
                                        uint32_t num_seqs, uint32_t hq, uint32_t hkv,
                                        uint32_t head_dim, uint32_t block_size,
                                        uint32_t max_blocks, uint32_t num_splits, float scale) {
  __shared__ atlas::PushScratch mine;
  decode_attn_cached<true, 1, NoTrace, true>(q, k_cache, v_cache, block_tables, kv_lens, part_o,
                                             part_ml, counters, out, hq, hkv, head_dim,
                                             block_size, max_blocks, num_splits, scale, &mine);
}

extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_rope_cluster_splitmajor_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps) {
  __shared__ atlas::PushScratch mine;
  decode_attn_roped<true, true, 1, NoTrace, true>(qkv, k_cache, v_cache, q_norm_w, k_norm_w,
                                                  cos_sin, positions, slots, block_tables,
                                                  kv_lens, part_o, part_ml, counters, out, hq,
                                                  hkv, head_dim, block_size, max_blocks,
                                                  num_splits, scale, eps, &mine);
}

// decode_attn_cluster_bf16 and decode_attn_rope_cluster_bf16 with the session-6 merge
// (ClusterPart: each block merges its warps, a cluster barrier, each block reads its peers'
// parts, a second barrier before exit) and their shortest splits' later rounds requested
// into L2 instead of loaded into registers: the A/B of the batch-1 chain (ops/routes
// ATLAS_DECODE_ATTN_B1_CHAIN=0).
extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_cluster_pull_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                  const __nv_bfloat16* v_cache, const int* block_tables,
                                  const int* kv_lens, float* part_o, float* part_ml,
                                  unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                                  uint32_t hq, uint32_t hkv, uint32_t head_dim,
                                  uint32_t block_size, uint32_t max_blocks,
                                  uint32_t num_splits, float scale) {
  __shared__ atlas::ClusterPart mine;
  decode_attn_cached<true, 1, NoTrace>(q, k_cache, v_cache, block_tables, kv_lens, part_o,
                                       part_ml, counters, out, hq, hkv, head_dim, block_size,
                                       max_blocks, num_splits, scale, &mine);
}

extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_rope_cluster_pull_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps) {
  __shared__ atlas::ClusterPart mine;
  decode_attn_roped<true, true, 1, NoTrace>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                            positions, slots, block_tables, kv_lens, part_o,
                                            part_ml, counters, out, hq, hkv, head_dim,
                                            block_size, max_blocks, num_splits, scale, eps,
                                            &mine);
}
