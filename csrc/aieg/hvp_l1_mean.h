// hvp_l1_mean: params of the mean ℓ1 norm of each token's Hessian-vector-product blocks over the
// probes, HETA's curvature S_i (specs/heta.md §2). Torch-free; shared by the CPU kernel and the
// CUDA kernel.
#pragma once

#include "aieg/macros.h"

namespace aieg {

struct HvpL1MeanParams {
  const void* hvps = nullptr;  // [m, n, d], `dtype`; innermost stride 1, other strides below
  void* out = nullptr;         // [n], contiguous, accumulation dtype
  int64_t m = 0;               // probes (>= 1, checked by prepare_hvp_l1_mean)
  int64_t n = 0;               // tokens
  int64_t d = 0;               // dimensions of one token's block
  int64_t stride_m = 0;        // in elements
  int64_t stride_n = 0;
  DType dtype = DType::F32;
};

// CUDA launcher (csrc/cuda/hvp_l1_mean_kernel.cu). Returns a cudaError_t value (0 = success).
int launch_hvp_l1_mean(const HvpL1MeanParams& p, void* stream);

}  // namespace aieg
