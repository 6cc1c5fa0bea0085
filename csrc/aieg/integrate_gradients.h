// integrate_gradients: params of the fused path integral Δ ⊙ Σ_m w_m G_m (spec §6.6).
// Torch-free; shared by the CPU kernel and the CUDA kernel.
#pragma once

#include "aieg/macros.h"

namespace aieg {

struct IntegrateGradientsParams {
  const void* grads = nullptr;  // [m, L, d], `dtype`; innermost stride 1, other strides below
  const void* weights = nullptr;  // [m], contiguous, accumulation dtype
  const void* delta = nullptr;  // [L, d], `delta_dtype`; innermost stride 1
  void* out = nullptr;          // [L] (reduce_sum) or [L, d], contiguous, accumulation dtype
  int64_t m = 0;
  int64_t L = 0;
  int64_t d = 0;
  int64_t grads_stride_m = 0;  // in elements
  int64_t grads_stride_l = 0;
  int64_t delta_stride_l = 0;
  DType dtype = DType::F32;        // grads
  DType delta_dtype = DType::F32;  // either `dtype` or the accumulation dtype
  bool reduce_sum = true;
};

// CUDA launcher (csrc/cuda/integrate_gradients_kernel.cu). Returns a cudaError_t value.
int launch_integrate_gradients(const IntegrateGradientsParams& p, void* stream);

}  // namespace aieg
