// torch side of the hvp_l1_mean CUDA kernel; compiled by the host compiler, only in CUDA builds
// (AIEG_WITH_CUDA). prepare_hvp_l1_mean (hvp_l1_mean.cpp, shared with the CPU op) checks and lays out the
// argument; this file selects the device, passes PyTorch's current stream and calls the torch-free
// launcher. The stream comes from c10::cuda::getCurrentCUDAStream (what at::cuda::getCurrentCUDAStream
// forwards to): ATen/cuda/CUDAContext.h would also require the cuBLAS/cuSPARSE headers.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

Tensor hvp_l1_mean_cuda(const Tensor& hvps) {
  const c10::cuda::CUDAGuard guard(hvps.device());
  auto r = prepare_hvp_l1_mean(hvps);
  const int err = launch_hvp_l1_mean(r.p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "hvp_l1_mean CUDA kernel failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CUDA, m) { m.impl("hvp_l1_mean", &hvp_l1_mean_cuda); }

}  // namespace aieg
