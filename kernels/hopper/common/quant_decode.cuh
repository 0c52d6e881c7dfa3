// Decoding quantized weight codes into values the kernels compute with: E4M3 (FP8) and
// E2M1 (NVFP4) to bf16 pairs (tensor-core A fragments) or f32, and E4M3 scales to f32.
// Every decode here is exact; one (e2m1x8_scaled_pairs) multiplies a bf16 subnormal.
#pragma once

#include <cuda_fp16.h>

#include "atlas_common.cuh"

namespace atlas::quant {

// 32-bit word i (0..3) of a 16-byte load (i a compile-time index after unrolling)
__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

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

// E2M1 magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6} as bf16 pairs (value 2i low, 2i + 1 high)
__device__ __forceinline__ constexpr uint32_t e2m1_pair(int i) {
  return i == 0 ? 0x3F000000u : i == 1 ? 0x3FC03F80u : i == 2 ? 0x40404000u : 0x40C04080u;
}

// Byte tables of the eight E2M1 magnitudes times a scale s, as bf16: byte j of
// {hi47:hi03} / {lo47:lo03} is the high / low byte of bf16(|e2m1_j| * s). A PRMT looks up
// four values at once in such a table (E2M1 has no hardware convert before sm_100).
struct E2m1Lut {
  uint32_t hi03, hi47, lo03, lo47;

  // For s given as a bf16 pair (s, s): four bf16x2 products (exact whenever |e2m1| * s fits
  // bf16's 8 significant bits: always for an E4M3 s, at most 2 x 4 bits) split into bytes.
  __device__ __forceinline__ static E2m1Lut scaled(uint32_t s_pair) {
    uint32_t p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(p[i]) : "r"(e2m1_pair(i)), "r"(s_pair));
    return {prmt(p[0], p[1], 0x7531u), prmt(p[2], p[3], 0x7531u), prmt(p[0], p[1], 0x6420u),
            prmt(p[2], p[3], 0x6420u)};
  }
};

// Eight E2M1 codes (q, value j in bits 4j..4j+3) -> four bf16 pairs (v0, v1) .. (v6, v7) of
// e2m1 * s through `lut`. Per four values: two table lookups (high and low bytes), a PRMT in
// sign-replicate mode spreading the code signs to byte msbs, one XOR giving each value the
// sign of code and scale, and two PRMTs interleaving the bytes into pairs. 16 instructions
// for 8 values, every result exact (the table's).
__device__ __forceinline__ void e2m1x8_to_bf16x2(uint32_t q, const E2m1Lut& lut,
                                                 uint32_t (&p)[4]) {
  const uint32_t idx = q & 0x77777777u;  // magnitudes; selector bit 3 (replicate) clear
  const uint32_t q4 = q << 4;             // byte msbs of q4 / q: signs of even / odd codes
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint32_t sel = half ? idx >> 16 : idx;
    const uint32_t sg = prmt(q4, q, half ? 0xFBEAu : 0xD9C8u);  // byte j: 0xFF if code < 0
    const uint32_t hs = prmt(lut.hi03, lut.hi47, sel) ^ (sg & 0x80808080u);
    const uint32_t lo = prmt(lut.lo03, lut.lo47, sel);
    p[2 * half] = prmt(lo, hs, 0x5140u);
    p[2 * half + 1] = prmt(lo, hs, 0x7362u);
  }
}

// Eight E2M1 codes (q, value j in bits 4j..4j+3) -> four bf16 pairs p[i] = (v_i, v_{i + 4})
// times 2^-126, by moving bits alone: a code's (e1 e0 m) go to bf16 bits 8..6 (exponent
// field e1 e0, mantissa msb m: 2^(e - 127) (1 + m / 2) = e2m1 * 2^-126 for e >= 1, and the
// bf16 subnormal 0.5 * 2^-126 for e = 0, m = 1) and its sign to bit 15. Values i and i + 4
// sit 16 bits apart, so one word operation moves both halves of a pair. Per pair: mask the
// two codes (LOP3), one integer multiply by 2^a + 2^(a + 6) (IMAD, FMA pipe) that writes
// each code twice, at bits 6..9 and 12..15 of its half (disjoint copies: no carries), and one
// mask keeping the magnitude of the first copy and the sign of the second (LOP3); plus one
// right shift for codes 2, 3, 6, 7: 13 instructions for 8 values, 9 on the integer pipe
// (the two-shift form took 17, the byte-table decode below 15 plus a table per scale).
// The subnormal never reaches the tensor cores: callers multiply every pair by a scaled
// group scale first (e2m1x8_scaled_pairs).
__device__ __forceinline__ void e2m1x8_to_bf16x2_spread(uint32_t q, uint32_t (&p)[4]) {
  constexpr uint32_t kKeep = 0x81C081C0u;  // sign (bit 15) and bits 8..6 of each half
  // codes 2, 3, 6, 7 where 0, 1, 4, 5 were (in asm, else the compiler folds the shift into
  // the masks' operands as more shifts)
  uint32_t r;
  asm("shr.b32 %0, %1, 8;" : "=r"(r) : "r"(q));
  p[0] = ((q & 0x000F000Fu) * 0x1040u) & kKeep;  // code bits 0..3 -> 6..9 and 12..15
  p[1] = ((q & 0x00F000F0u) * 0x0104u) & kKeep;  // code bits 4..7 -> 6..9 and 12..15
  p[2] = ((r & 0x000F000Fu) * 0x1040u) & kKeep;
  p[3] = ((r & 0x00F000F0u) * 0x0104u) & kKeep;
}

// e2m1x8_scaled_pairs's products are e2m1 * s * 2^(kE2m1ScaleExp - 126)
constexpr int kE2m1ScaleExp = 119;
// what e2m1x8_scaled_pairs's products are short of: multiply the sums by it
constexpr float kE2m1PairScale = 0x1p7f;

// p[i] = bf16 pairs (v_i, v_{i + 4}) * s / kE2m1PairScale of eight E2M1 codes, for s given
// as the bf16 pair (s, s) * 2^kE2m1ScaleExp (e4m3_to_bf16_pair_scaled): the spread decode,
// then one bf16x2 multiply per pair (FMA pipe). Exact: |e2m1| * |s| has at most 2 + 4
// significant bits and lies in [2^-17, 2^12] * 2^-7, bf16 normals; the multiply takes the
// subnormal 0.5 * 2^-126 as an input (bf16 arithmetic keeps subnormals: no .ftz exists for
// it), so only normal values (or zero) reach the MMA.
__device__ __forceinline__ void e2m1x8_scaled_pairs(uint32_t q, uint32_t s_pair,
                                                    uint32_t (&p)[4]) {
  e2m1x8_to_bf16x2_spread(q, p);
#pragma unroll
  for (int i = 0; i < 4; ++i) asm("mul.rn.bf16x2 %0, %0, %1;" : "+r"(p[i]) : "r"(s_pair));
}

// x pairs matching e2m1x8_scaled_pairs's (v_i, v_{i + 4}) from eight bf16 values held as
// pairs (x0, x1) (x2, x3) (x4, x5) (x6, x7): four byte permutes.
__device__ __forceinline__ void spread_x_pairs(uint32_t x01, uint32_t x23, uint32_t x45,
                                               uint32_t x67, uint32_t (&p)[4]) {
  p[0] = prmt(x01, x45, 0x5410u);
  p[1] = prmt(x01, x45, 0x7632u);
  p[2] = prmt(x23, x67, 0x5410u);
  p[3] = prmt(x23, x67, 0x7632u);
}

// Two E4M3 codes (bits 0..7 and 8..15) -> bf16 pairs (s0, s0) and (s1, s1) times
// 2^kE2m1ScaleExp, exactly: E4M3 -> f16 -> f32 are exact, the power-of-two multiply is
// exact (|s| <= 448: at most 1.75 * 2^127, the smallest subnormal 2^-9 lands on 2^110), and
// so is the bf16 pair of a 4-bit significand. Zero stays zero, signs are kept.
__device__ __forceinline__ void e4m3x2_to_bf16_pairs_scaled(uint32_t codes, uint32_t& s0,
                                                            uint32_t& s1) {
  uint32_t h;
  asm("{\n .reg .b16 c;\n cvt.u16.u32 c, %1;\n cvt.rn.f16x2.e4m3x2 %0, c;\n}"
      : "=r"(h) : "r"(codes));
  const __half2 hh = *reinterpret_cast<const __half2*>(&h);
  static_assert(kE2m1ScaleExp == 119, "the factor below is 2^kE2m1ScaleExp");
  const float f0 = __low2float(hh) * 0x1p119f, f1 = __high2float(hh) * 0x1p119f;
  const __nv_bfloat162 b0 = __floats2bfloat162_rn(f0, f0), b1 = __floats2bfloat162_rn(f1, f1);
  s0 = *reinterpret_cast<const uint32_t*>(&b0);
  s1 = *reinterpret_cast<const uint32_t*>(&b1);
}

// Two E4M3 codes (bits 0..7 and 8..15) -> bf16 pairs (s0, s0) and (s1, s1), exactly: the
// hardware convert to f16 is exact, and so are f16 -> f32 -> bf16 for E4M3's 4 bits.
__device__ __forceinline__ void e4m3x2_to_bf16_pairs(uint32_t codes, uint32_t& s0,
                                                     uint32_t& s1) {
  asm("{\n .reg .b16 c, h0, h1;\n .reg .f32 f0, f1;\n .reg .b32 h;\n cvt.u16.u32 c, %2;\n"
      " cvt.rn.f16x2.e4m3x2 h, c;\n mov.b32 {h0, h1}, h;\n cvt.f32.f16 f0, h0;\n"
      " cvt.f32.f16 f1, h1;\n cvt.rn.bf16x2.f32 %0, f0, f0;\n cvt.rn.bf16x2.f32 %1, f1, f1;\n}"
      : "=r"(s0), "=r"(s1) : "r"(codes));
}

// ---- E2M1 to f16 pairs for packed half-precision FMAs (gemv_nvfp4.cu's batch-1 GEMV) ----
// The pairs hold the magnitudes times 2^kE2m1HalfExp: a group of 16 products x * e2m1 * 2^-6
// then sums below 16 * 6 * 2^-6 * 65504 < 2^15 for every finite f16 x (no overflow), and
// products stay f16 normals down to |x| = 2^-7 (below, f16 subnormals: absolute error
// 2^-25, far under the group's larger products).
constexpr int kE2m1HalfExp = -6;
// what the f16 products are short of: multiply the sums by it
constexpr float kE2m1HalfScale = 0x1p6f;
static_assert(kE2m1HalfExp == -6, "kE2m1HalfScale is 2^-kE2m1HalfExp");

// Four E4M3 codes (code i in bits 8i..8i+7) -> their exact f16 pairs (v0, v1), (v2, v3):
// two hardware converts (cvt.rn.f16x2.e4m3x2).
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n"
      " cvt.rn.f16x2.e4m3x2 %1, b;\n}"
      : "=r"(lo), "=r"(hi) : "r"(w));
}

// Eight E2M1 codes (q, value j in bits 4j..4j+3) as E4M3 bytes: code (s, e1 e0 m) becomes
// s << 7 | (e1 e0 m) << 2, exponent field e and mantissa 4m, whose value is e2m1 * 2^-6
// exactly (kE2m1HalfExp; e = 0: the E4M3 subnormal m 2^-7); `even` holds codes 0 2 4 6 in
// its bytes 0..3, `odd` codes 1 3 5 7. The two left shifts issue as IMAD.SHL (FMA pipe), the
// four LOP3s and the right shift on the half-rate ALU pipe (SASS, nvcc 13.0). The right shift
// as a multiply-high by 2^30 (IMAD.HI, one ALU instruction a word fewer) measured slower
// (gpu175, H100, Qwen3-8B NVFP4 batch 1: 2.317 / 2.325 vs 2.299 / 2.299 ms) and is gone.
__device__ __forceinline__ void e2m1x8_e4m3_bytes(uint32_t q, uint32_t& even, uint32_t& odd) {
  static_assert(kE2m1HalfExp == -6, "the E4M3 bytes hold e2m1 * 2^-6");
  even = ((q << 2) & 0x1C1C1C1Cu) | ((q << 4) & 0x80808080u);
  odd = ((q >> 2) & 0x1C1C1C1Cu) | (q & 0x80808080u);
}

// Eight E2M1 codes -> four exact f16 pairs of e2m1 * 2^-6 in x's own pair order (v0, v1) ..
// (v6, v7): the E4M3 bytes interleaved by two PRMTs, then four converts (cvt.rn.f16x2.
// e4m3x2, exact): 13 instructions, 11 of them on the half-rate ALU pipe. The split order's
// A/B (ATLAS_NVFP4_H2_SPLIT=0, gemv_nvfp4.cu).
__device__ __forceinline__ void e2m1x8_to_f16x2_cvt(uint32_t q, uint32_t (&p)[4]) {
  uint32_t even, odd;
  e2m1x8_e4m3_bytes(q, even, odd);
  e4m3x4_to_f16x2(prmt(even, odd, 0x5140u), p[0], p[1]);  // codes 0 1 2 3
  e4m3x4_to_f16x2(prmt(even, odd, 0x7362u), p[2], p[3]);  // codes 4 5 6 7
}

// The same f16 values in the split pair order (v0, v2) (v4, v6) (v1, v3) (v5, v7), each
// E4M3 byte word converted as it is: no PRMT, 11 instructions, 9 on the ALU pipe. The GEMV
// builds its x pairs in the same order (gemv_h2.cuh h2_x_pairs, kSplitPairs) at no cost
// (any two f32 pack into an f16 pair), so only the decode shrinks.
__device__ __forceinline__ void e2m1x8_to_f16x2_split(uint32_t q, uint32_t (&p)[4]) {
  uint32_t even, odd;
  e2m1x8_e4m3_bytes(q, even, odd);
  e4m3x4_to_f16x2(even, p[0], p[1]);  // (v0, v2), (v4, v6)
  e4m3x4_to_f16x2(odd, p[2], p[3]);   // (v1, v3), (v5, v7)
}

// Two E4M3 codes (bits 0..15) -> their exact f32 values (hardware convert to an f16 pair,
// exact, widened).
__device__ __forceinline__ void e4m3x2_to_f32(uint32_t codes, float& f0, float& f1) {
  uint32_t h;
  asm("{\n .reg .b16 c;\n cvt.u16.u32 c, %1;\n cvt.rn.f16x2.e4m3x2 %0, c;\n}"
      : "=r"(h) : "r"(codes));
  const __half2 hh = *reinterpret_cast<const __half2*>(&h);
  f0 = __low2float(hh);
  f1 = __high2float(hh);
}

}  // namespace atlas::quant
