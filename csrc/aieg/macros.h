// Shared macros and the dtype tag for the aieg_fast kernels.
// Torch-free: included by g++ (CPU kernels, bindings) and by nvcc alone (CUDA kernels).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define AIEG_HOST_DEVICE __host__ __device__
#else
#define AIEG_HOST_DEVICE
#endif

#define AIEG_RESTRICT __restrict__

namespace aieg {

// Element type of a tensor that crosses the torch/kernel boundary as a raw pointer.
// torch's Half/BFloat16 share their memory layout with __half/__nv_bfloat16.
enum class DType : int32_t { F32 = 0, F64 = 1, F16 = 2, BF16 = 3 };

AIEG_HOST_DEVICE constexpr inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace aieg
