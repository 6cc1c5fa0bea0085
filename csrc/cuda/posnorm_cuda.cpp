// torch side of the posnorm CUDA kernel; compiled by the host compiler, only in CUDA builds (AIEG_WITH_CUDA).
// prepare_posnorm (posnorm.cpp, shared with the CPU op) checks and lays out the arguments; this file selects
// the device, passes PyTorch's current stream and calls the torch-free launcher. The stream comes from
// c10::cuda::getCurrentCUDAStream (what at::cuda::getCurrentCUDAStream forwards to): ATen/cuda/CUDAContext.h
// would also require the cuBLAS/cuSPARSE headers.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

Tensor posnorm_cuda(const Tensor& scores, const OptTensor& valid_mask, c10::string_view mode) {
  const c10::cuda::CUDAGuard guard(scores.device());
  auto r = prepare_posnorm(scores, valid_mask, sv(mode));
  const int err = launch_posnorm(r.p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "posnorm CUDA kernel failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CUDA, m) { m.impl("posnorm", &posnorm_cuda); }

}  // namespace aieg
