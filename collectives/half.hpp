#pragma once
// float16 and bfloat16 <-> float32 conversions with round-to-nearest-even, used by the host reductions and by
// the tests' serial references. Header-only so the loops that call them inline them.

#include <cstdint>
#include <cstring>

namespace dcomm::coll {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// IEEE binary16 -> binary32 (exact).
inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float32.
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

/// binary32 -> binary16, round to nearest even; overflow goes to infinity, NaN stays NaN.
inline uint16_t float_to_half(float f) {
  uint32_t u = float_to_bits(f);
  auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is subnormal (or zero). Adding 0.5 (2^-1) aligns the
    // significand so that float32's own rounding (which is to nearest even) produces the half's bits.
    float shifted = bits_to_float(abs) + 0.5f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(float_to_bits(shifted) - 0x3F000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  uint32_t odd = (abs >> 13) & 1u;
  abs += 0xC8000FFFu + odd;  // -(112 << 23) + rounding bias 0xFFF (+1 when the kept lsb is odd)
  return static_cast<uint16_t>(sign | (abs >> 13));
}

/// bfloat16 -> float32 (exact).
inline float bf16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

/// float32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  uint32_t odd = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + odd) >> 16);
}

}  // namespace dcomm::coll
