// emphasis_factors: params and the per-element formulas (spec §6.5, IDG §3.1).
// Torch-free; shared by the CPU kernel and the CUDA kernel.
#pragma once

#include "aieg/macros.h"
#include "aieg/math.h"

namespace aieg {

enum class EfMode : int32_t { Fd = 0, Autograd = 1, None = 2, Completeness = 3 };
enum class EfSign : int32_t { Abs = 0, Signed = 1, Relu = 2, MinMax = 3 };
enum class EfNorm : int32_t { L1 = 0, None = 1 };

struct EmphasisFactorsParams {
  const void* logits = nullptr;  // [M], contiguous, accumulation dtype (the binding casts)
  const void* alphas = nullptr;  // [M], same
  const void* widths = nullptr;  // [M], same
  const void* slopes = nullptr;  // [M], same; G_m·Δ, only for EfMode::Completeness (else nullptr)
  void* out = nullptr;           // [M], accumulation dtype
  int64_t M = 0;
  DType dtype = DType::F32;  // F32 or F64 (the accumulation dtype)
  EfMode mode = EfMode::Fd;
  EfSign sign = EfSign::Abs;
  EfNorm norm = EfNorm::L1;
};

// Raw weight w_i before the sign transform (all inputs finite): Fd has no increment before the
// first sample (r_0 = 0); Autograd's slopes are given at every sample, the first included.
template <typename acc>
AIEG_HOST_DEVICE inline acc ef_raw_weight(const acc* f, const acc* a, const acc* d, int64_t i, EfMode mode) {
  if (mode == EfMode::None) return d[i];
  if (mode != EfMode::Fd) return f[i] * d[i];
  acc r = acc(0);
  if (i > 0) {
    const acc da = a[i] - a[i - 1];
    const acc df = f[i] - f[i - 1];
    r = (da != acc(0)) ? df / da : acc(0);
  }
  return r * d[i];
}

// Sign transform for abs / signed / relu (minmax needs the row extrema: ef_minmax).
template <typename acc>
AIEG_HOST_DEVICE inline acc ef_sign(acc w, EfSign sign) {
  switch (sign) {
    case EfSign::Abs:
      return abs_val(w);
    case EfSign::Relu:
      return relu_val(w);
    default:
      return w;
  }
}

// minmax sign: (w − lo)/(hi − lo), zeros when hi ≤ lo (or NaN extrema), and EF_1 := 0.
template <typename acc>
AIEG_HOST_DEVICE inline acc ef_minmax(acc w, acc lo, acc hi, int64_t i) {
  if (i == 0 || !(hi > lo)) return acc(0);
  return (w - lo) / (hi - lo);
}

// The transformed weight of position i (what the normalisation sees).
template <typename acc>
AIEG_HOST_DEVICE inline acc ef_weight(const acc* f, const acc* a, const acc* d, int64_t i,
                                      const EmphasisFactorsParams& p, acc lo, acc hi) {
  const acc w = ef_raw_weight(f, a, d, i, p.mode);
  if (p.mode == EfMode::None) return w;
  if (p.sign == EfSign::MinMax) return ef_minmax(w, lo, hi, i);
  return ef_sign(w, p.sign);
}

// Completeness weight ω_i = clip(Δf_i / p_i, 0, 1)·g_i with g_i = a_i − a_{i−1}, p_i = s_i·g_i
// (ω_0 = 0, and 0 where p_i = 0); no sign transform and no normalisation follow. The clip keeps NaN
// as NaN (like torch.clamp).
template <typename acc>
AIEG_HOST_DEVICE inline acc ef_completeness_weight(const acc* f, const acc* a, const acc* s, int64_t i) {
  if (i == 0) return acc(0);
  const acc g = a[i] - a[i - 1];
  const acc p = s[i] * g;
  if (p == acc(0)) return acc(0) * g;
  const acc ratio = (f[i] - f[i - 1]) / p;
  const acc ef = ratio < acc(0) ? acc(0) : (ratio > acc(1) ? acc(1) : ratio);
  return ef * g;
}

// Normalisation: l1 → w / total (1/M when total is not > 0, as (acc)(1.0 / M) like torch.full);
// none → w / M.
template <typename acc>
AIEG_HOST_DEVICE inline acc ef_normalise(acc w, acc total, int64_t M, EfNorm norm) {
  if (norm == EfNorm::None) return w / static_cast<acc>(M);
  if (!(total > acc(0))) return static_cast<acc>(1.0 / static_cast<double>(M));
  return w / total;
}

// CUDA launcher (csrc/cuda/emphasis_factors_kernel.cu). Returns a cudaError_t value.
int launch_emphasis_factors(const EmphasisFactorsParams& p, void* stream);

}  // namespace aieg
