// The phase trace of the decode attention kernels' traced twins (decode_attn.cuh's template in
// attention_twins.cu, attention_long.cu's early entry): thread 0 of every block stamps
// %globaltimer and clock64 at each phase into u64 trace[block][kTraceWords]
// (ops/attention.py TRACE_*; tools/gpu/trace_decode_attn.py reads them).
#pragma once

#include <stdint.h>

#include <type_traits>

namespace {

// The traced twins are the same template instances with PhaseTrace for NoTrace: thread 0 of
// every block stamps %globaltimer (ns, one clock for the whole GPU) and clock64 (this SM's
// cycles) when it reaches each phase, so tools/gpu/trace_decode_attn.py can say where a
// launch's time goes (issue order, the fixed latency per phase) instead of guessing. NoTrace
// compiles to nothing: the production entry points are unchanged.
enum TracePhase : int {
  kTraceStart,        // first instruction
  kTraceKvLen,        // kv_len read and the block's split decided (used, so arrived)
  kTracePrologue,     // the pre-wait reads issued, the constants staged (just before the wait)
  kTraceLoaded,       // thread 0's pre-wait K/V rows arrived (used: so the wait's own cost
                      // is waited - loaded, whether or not griddepcontrol.wait drains loads)
  kTraceWaited,       // griddepcontrol.wait returned
  kTraceQReady,       // q (normed and rotated) in registers: the qkv row arrived
  kTraceRound1,       // the first K/V round consumed (its scores and p v)
  kTraceKeysDone,     // the split's last K/V round consumed
  kTraceBlockMerged,  // the block's warps merged and its partial / output stored
  kTraceArrived,      // every split of the kv head arrived (attention_long.cu SpreadMerge)
  kTraceMerged,       // the split / cluster merge done
  kTraceEnd,          // exit (every path, the early ones included)
  kTracePhases
};
constexpr int kTraceWords = 32;       // u64 words a block: ns at [p], cycles at [16 + p]
constexpr int kTraceSmWord = 12;      // the block's SM id
constexpr int kTraceKeyedWord = 13;   // 1 when the block attended over keys
static_assert(kTracePhases <= kTraceSmWord, "trace layout");

struct NoTrace {
  __device__ __forceinline__ void mark(TracePhase) const {}
  __device__ __forceinline__ void mark(TracePhase, float) const {}
  __device__ __forceinline__ void mark(TracePhase, int) const {}
  __device__ __forceinline__ void note(int, unsigned long long) const {}
};

struct PhaseTrace {
  unsigned long long* block;  // this block's kTraceWords

  __device__ __forceinline__ explicit PhaseTrace(unsigned long long* trace)
      : block(trace + ((static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x +
                       blockIdx.x) * kTraceWords) {}

  __device__ __forceinline__ void mark(TracePhase phase) const {
    if (threadIdx.x != 0) return;
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    const long long cycles = clock64();
    block[phase] = ns;
    block[16 + phase] = static_cast<unsigned long long>(cycles);
  }
  // The stamp taken after `dep` is computed: the empty asm consuming it orders the clock
  // reads behind whatever produced it, so the stamp means "arrived and used".
  __device__ __forceinline__ void mark(TracePhase phase, float dep) const {
    asm volatile("" :: "f"(dep));
    mark(phase);
  }
  __device__ __forceinline__ void mark(TracePhase phase, int dep) const {
    asm volatile("" :: "r"(dep));
    mark(phase);
  }
  __device__ __forceinline__ void note(int word, unsigned long long value) const {
    if (threadIdx.x == 0) block[word] = value;
  }
};

// The trace a (traced or plain) entry point passes down, its first stamps taken.
template <class T>
__device__ __forceinline__ T entry_trace(unsigned long long* trace) {
  if constexpr (std::is_same_v<T, NoTrace>) {
    return NoTrace{};
  } else {
    const PhaseTrace tr(trace);
    tr.mark(kTraceStart);
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    tr.note(kTraceSmWord, smid);
    return tr;
  }
}

}  // namespace
