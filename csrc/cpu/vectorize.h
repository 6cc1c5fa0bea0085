// Helpers that let the compiler vectorise the CPU kernels.
//
// AIEG_CPU_CLONES compiles a hot loop for several x86-64 levels (AVX-512F, AVX2, baseline) and picks
// one at load time (GCC/clang function multi-versioning), so the extension stays a baseline x86-64
// build that still uses wide vectors. The loops it is used on have no reductions across vector
// lanes, so every version gives bit-identical results.
//
// Conversions between the storage dtypes and the accumulation type are written so that the
// compiler vectorises the loops that use them (c10's own Half/BFloat16 conversions stay scalar code on a
// baseline x86-64 build). Bit-identical to c10's conversions (checked for every 16-bit input and
// every float).
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AIEG_X86_F16C 1
#endif

#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 8))
#define AIEG_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define AIEG_CPU_CLONES
#endif

namespace aieg {

inline float load_acc(float x) { return x; }
inline double load_acc(double x) { return x; }

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

inline float load_acc(c10::BFloat16 x) { return bits_to_float(static_cast<uint32_t>(x.x) << 16); }

// IEEE half -> float, exact for every input (zeros, subnormals, inf, NaN payloads), branch-free:
// rebias the exponent with integer adds (NaNs come out quiet, as with c10::Half); subnormals are
// renormalised by one subtraction of normal
// floats (no subnormal operands, so no slow microcode path).
inline float load_acc(c10::Half x) {
  const uint32_t h = x.x;
  const uint32_t em = (h & 0x7fffu) << 13;  // exponent and mantissa in float position
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t normal = em + (112u << 23);  // 127 - 15
  const uint32_t infnan = (normal + (112u << 23)) | (static_cast<uint32_t>((em & 0x007fe000u) != 0) << 22);
  const uint32_t sub = float_to_bits(bits_to_float(normal + (1u << 23)) - bits_to_float(113u << 23));
  // Select with masks rather than branches so that the loops calling this vectorise.
  const uint32_t is_special = 0u - static_cast<uint32_t>(exp == 0x0f800000u);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(exp == 0);
  const uint32_t r = (normal & ~(is_special | is_sub)) | (infnan & is_special) | (sub & is_sub);
  return bits_to_float(r | ((h & 0x8000u) << 16));
}

// Converts n halves to floats. On x86 CPUs with F16C (checked once at run time; the extension is
// compiled for baseline x86-64) this is one vcvtph2ps per 8 values, otherwise load_acc per value.
// Both are exact and quiet NaNs like c10.
#if defined(AIEG_X86_F16C)
__attribute__((target("avx,f16c"))) inline void half_to_float_f16c(const c10::Half* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {  // tail through a zero-padded block of 8
    uint16_t in[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float out[8];
    std::memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

__attribute__((target("avx,f16c"))) inline void float_to_half_f16c(const float* src, c10::Half* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (i < n) {  // tail through a zero-padded block of 8
    float in[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint16_t out[8];
    std::memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

inline bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}
#endif

inline void half_to_float(const c10::Half* src, float* dst, int64_t n) {
#if defined(AIEG_X86_F16C)
  if (cpu_has_f16c()) {
    half_to_float_f16c(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = load_acc(src[i]);
}

// Rounding of an accumulation value to the storage dtype (round to nearest even, like .to(dtype)).
template <typename T>
inline T store_acc(float v);
template <>
inline float store_acc<float>(float v) {
  return v;
}
template <typename T>
inline T store_acc(double v) {
  return static_cast<T>(v);
}

template <>
inline c10::BFloat16 store_acc<c10::BFloat16>(float v) {
  const uint32_t u = float_to_bits(v);
  const uint32_t is_nan = 0u - static_cast<uint32_t>((u & 0x7fffffffu) > 0x7f800000u);
  const uint32_t rounded = (u + (((u >> 16) & 1u) + 0x7fffu)) >> 16;
  return c10::BFloat16(static_cast<uint16_t>((rounded & ~is_nan) | (0x7fc0u & is_nan)), c10::BFloat16::from_bits());
}

// float -> IEEE half with round to nearest even, overflow to inf, subnormals and quiet NaN
// (the branch-free algorithm of c10/FP16, with the selects written as masks).
template <>
inline c10::Half store_acc<c10::Half>(float v) {
  const float scale_to_inf = bits_to_float(0x77800000u);   // 2^112
  const float scale_to_zero = bits_to_float(0x08800000u);  // 2^-110
  const uint32_t w = float_to_bits(v);
  float base = (bits_to_float(w & 0x7fffffffu) * scale_to_inf) * scale_to_zero;
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xff000000u;
  const uint32_t small = 0u - static_cast<uint32_t>(bias < 0x71000000u);
  bias = (bias & ~small) | (0x71000000u & small);
  base = bits_to_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = float_to_bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007c00u) + (bits & 0x00000fffu);
  const uint32_t is_nan = 0u - static_cast<uint32_t>(shl1_w > 0xff000000u);
  const uint32_t r = (sign >> 16) | ((nonsign & ~is_nan) | (0x7e00u & is_nan));
  return c10::Half(static_cast<uint16_t>(r), c10::Half::from_bits());
}

// Rounds n floats to halves (round to nearest even): vcvtps2ph with F16C, else store_acc. The
// two differ only in the payload bits of NaNs (both give a quiet NaN of the same sign).
inline void float_to_half(const float* src, c10::Half* dst, int64_t n) {
#if defined(AIEG_X86_F16C)
  if (cpu_has_f16c()) {
    float_to_half_f16c(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = store_acc<c10::Half>(src[i]);
}

}  // namespace aieg
