// Decoding quantized weight codes into values the kernels compute with: E4M3 (FP8) and
// E2M1 (NVFP4) to bf16 pairs (tensor-core A fragments) or f32, and E4M3 scales to f32.
// Every decode here is exact; none relies on subnormal arithmetic.
#pragma once

#include "atlas_common.cuh"

namespace atlas::quant {

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// One E4M3 code (bits 0..7) -> f32, exactly: the 7 magnitude bits moved to f32 bits 26..20
// give the value times 2^-120 (E4M3 subnormals land on f32 subnormals, which nothing here
// flushes), the 2^120 multiply is exact.
__device__ __forceinline__ float e4m3_to_f32(uint32_t b) {
  return __uint_as_float(((b & 0x7fu) << 20) | ((b & 0x80u) << 24)) * 0x1p120f;
}

// Two E4M3 codes (bits 0..15 of `codes`, or 16..31 with kHigh; value 0 low) -> a bf16 pair
// holding each value times 2^-112. The hardware convert (sm_89+) gives f16 exactly (E4M3's
// range and 3 mantissa bits fit f16's normals), whose mantissa ends in 7 zero bits; shifting
// right by 3 puts the f16 exponent and mantissa in bf16's fields (an exponent field of
// 1..30 under bias 127: the f16 value times 2^(15 - 127), a normal bf16) and the sign on
// bit 12 / 28, which the multiply-add moves to bit 15 / 31 (x + 7 x = 8 x). Zero stays
// zero. F2FP + 3 integer ops.
constexpr float kE4m3PairScale = 0x1p112f;  // what e4m3x2_to_bf16x2's values are short of

template <bool kHigh>
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t codes) {
  uint32_t h;
  if constexpr (kHigh)
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;\n}"
        : "=r"(h) : "r"(codes));
  else
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n}"
        : "=r"(h) : "r"(codes));
  const uint32_t t = h >> 3;
  return t + 7u * (t & 0x10001000u);
}

// byte m of {kHi47:kHi03} / {kLo47:kLo03} = byte 3 / byte 2 of the f32 (= the bf16) of
// E2M1 magnitude m in {0, 0.5, 1, 1.5, 2, 3, 4, 6}
constexpr uint32_t kE2m1Hi03 = 0x3F3F3F00u, kE2m1Hi47 = 0x40404040u;
constexpr uint32_t kE2m1Lo03 = 0xC0800000u, kE2m1Lo47 = 0xC0804000u;

// The two table registers of the E2M1 lookups. PRMT takes one table half as an immediate
// but the other from a register; a constant would sit in a uniform register and be copied
// into a regular one before every lookup, so the tables are made per lane (OR-ed with
// laneid >> 5, always 0, opaque to the compiler) and stay in two registers.
struct E2m1Tables {
  uint32_t hi03, lo03;
  __device__ __forceinline__ static E2m1Tables make() {
    E2m1Tables t;
    asm volatile("{\n .reg .u32 l;\n mov.u32 l, %%laneid;\n shr.u32 l, l, 5;\n"
                 " or.b32 %0, l, %2;\n or.b32 %1, l, %3;\n}"
                 : "=r"(t.hi03), "=r"(t.lo03) : "n"(kE2m1Hi03), "n"(kE2m1Lo03));
    return t;
  }
};

// Eight E2M1 codes (q, value j in bits 4j..4j+3) -> four exact bf16 pairs (v0, v1) ..
// (v6, v7). E2M1 has no hardware convert before sm_100: PRMT byte lookups in 8-entry
// tables give each value's bf16 high and low bytes (four values a lookup), PRMTs in
// sign-replicate mode spread the signs to byte msbs, and two PRMTs per four values
// interleave the bytes into pairs. 16 instructions for 8 values.
__device__ __forceinline__ void e2m1x8_to_bf16x2(uint32_t q, const E2m1Tables& tab,
                                                 uint32_t (&p)[4]) {
  const uint32_t idx = q & 0x77777777u;  // magnitudes; selector bit 3 (replicate) clear
  const uint32_t q4 = q << 4;             // byte msbs of q4 / q: signs of even / odd values
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint32_t sel = half ? idx >> 16 : idx;
    const uint32_t sg = prmt(q4, q, half ? 0xFBEAu : 0xD9C8u);  // byte j: 0xFF if v < 0
    const uint32_t hs = prmt(tab.hi03, kE2m1Hi47, sel) | (sg & 0x80808080u);
    const uint32_t lo = prmt(tab.lo03, kE2m1Lo47, sel);
    p[2 * half] = prmt(lo, hs, 0x5140u);
    p[2 * half + 1] = prmt(lo, hs, 0x7362u);
  }
}

// bf16x2 product, one rounding per half (exact when the product fits bf16's 8 bits).
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// An E4M3 code as a bf16 pair (the value in both halves), exactly: E4M3's 4 significant
// bits and range 2^-9 .. 448 fit bf16's normals.
__device__ __forceinline__ uint32_t e4m3_to_bf16_pair(uint32_t b) {
  const uint32_t v = __float_as_uint(e4m3_to_f32(b)) >> 16;  // exact: low 16 bits are zero
  return v | (v << 16);
}

}  // namespace atlas::quant
