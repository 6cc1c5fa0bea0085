// posnorm: params, per-row statistics and the per-element formula (spec §6.8).
// Torch-free; the CPU kernel and the CUDA kernel both call posnorm_value().
#pragma once

#include "aieg/macros.h"
#include "aieg/math.h"

namespace aieg {

enum class PosnormMode : int32_t { MinMax = 0, ReluMax = 1, AbsSum = 2, None = 3 };

struct PosnormParams {
  const void* scores = nullptr;  // [rows, L], contiguous, `dtype`
  const bool* valid = nullptr;   // [rows, L], contiguous; nullptr means every position is valid
  void* out = nullptr;           // [rows, L], contiguous, accumulation dtype
  int64_t rows = 0;
  int64_t L = 0;
  DType dtype = DType::F32;
  PosnormMode mode = PosnormMode::MinMax;
};

// Statistics of one row over its valid positions, taken on the cleaned scores
// (non-finite valid scores count as 0 here; the row is NaN anyway).
template <typename acc>
struct PosnormStats {
  int64_t count;
  bool nonfinite;
  acc lo;       // min over valid, +inf if none
  acc hi;       // max over valid, -inf if none
  acc abs_sum;  // sum of |s| over valid
  double abs_sum_wide;  // the same sum in double (read only when abs_sum overflows acc)
};

// The cleaned score: valid and finite scores pass, everything else is 0.
template <typename acc>
AIEG_HOST_DEVICE inline acc posnorm_clean(acc s, bool valid) {
  return (valid && is_finite(s)) ? s : acc(0);
}

// Output for one position, given the row statistics. Mirrors reference.posnorm operation by
// operation (same roundings in the accumulation dtype).
template <typename acc>
AIEG_HOST_DEVICE inline acc posnorm_value(acc s, bool valid, const PosnormStats<acc>& st, PosnormMode mode) {
  if (!valid) return acc(0);
  if (st.nonfinite) return quiet_nan<acc>();
  const acc c = posnorm_clean(s, valid);
  switch (mode) {
    case PosnormMode::None:
      return c;
    case PosnormMode::MinMax: {
      const acc rng = st.hi - st.lo;
      if (!is_finite(rng)) {  // finite extremes whose range overflows: the same ratio from halves
        const acc h = acc(0.5);
        return (c * h - st.lo * h) / (st.hi * h - st.lo * h);
      }
      return rng > acc(0) ? (c - st.lo) / rng : acc(1);
    }
    case PosnormMode::ReluMax:
      return st.hi > acc(0) ? relu_val(c) / st.hi : acc(0);
    case PosnormMode::AbsSum:
    default: {
      const int64_t n = st.count > 1 ? st.count : 1;
      if (!is_finite(st.abs_sum))  // a sum past acc's range: the share in double
        return static_cast<acc>(static_cast<double>(abs_val(c)) / st.abs_sum_wide);
      return st.abs_sum > acc(0) ? abs_val(c) / st.abs_sum : acc(1) / static_cast<acc>(n);
    }
  }
}

// CUDA launcher (csrc/cuda/posnorm_kernel.cu). Returns a cudaError_t value (0 = success).
int launch_posnorm(const PosnormParams& p, void* stream);

}  // namespace aieg
