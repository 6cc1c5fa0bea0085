// interpolate_path: params and the per-element formula γ(α) = E′ + α (E − E′) (spec §6.3).
// Torch-free; shared by the CPU kernel and the CUDA kernel.
#pragma once

#include "aieg/macros.h"

namespace aieg {

struct InterpolatePathParams {
  const void* input = nullptr;     // [L, d], `dtype`; innermost stride 1
  const void* baseline = nullptr;  // [L, d], `baseline_dtype`; innermost stride 1
  const void* alphas = nullptr;    // [m], contiguous, accumulation dtype
  const bool* fixed = nullptr;     // [L], contiguous, or nullptr
  void* out = nullptr;             // [m, L, d], contiguous, `dtype`
  int64_t m = 0;
  int64_t L = 0;
  int64_t d = 0;
  int64_t input_stride_l = 0;
  int64_t baseline_stride_l = 0;
  DType dtype = DType::F32;           // input and output
  DType baseline_dtype = DType::F32;  // either `dtype` or the accumulation dtype
};

// Same operation order as the reference: b + α·(e − b), each step rounded in the accumulation
// dtype (no fused multiply-add on the CPU side; see setup.py).
template <typename acc>
AIEG_HOST_DEVICE inline acc interpolate_point(acc e, acc b, acc alpha) {
  return b + alpha * (e - b);
}

// CUDA launcher (csrc/cuda/interpolate_path_kernel.cu). Returns a cudaError_t value.
int launch_interpolate_path(const InterpolatePathParams& p, void* stream);

}  // namespace aieg
