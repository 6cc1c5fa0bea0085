// torch side of the interpolate_path CUDA kernel; compiled by the host compiler, only in CUDA builds
// (AIEG_WITH_CUDA). prepare_interpolate_path (interpolate_path.cpp, shared with the CPU op) checks and lays
// out the arguments; this file selects the device, passes PyTorch's current stream and calls the torch-free
// launcher. The stream comes from c10::cuda::getCurrentCUDAStream (what at::cuda::getCurrentCUDAStream
// forwards to): ATen/cuda/CUDAContext.h would also require the cuBLAS/cuSPARSE headers.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include "ops.h"

namespace aieg {
namespace {

Tensor interpolate_path_cuda(const Tensor& input_embeds, const Tensor& baseline_embeds, const Tensor& alphas,
                             const OptTensor& fixed_mask) {
  const c10::cuda::CUDAGuard guard(input_embeds.device());
  auto r = prepare_interpolate_path(input_embeds, baseline_embeds, alphas, fixed_mask);
  const int err = launch_interpolate_path(r.p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "interpolate_path CUDA kernel failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CUDA, m) { m.impl("interpolate_path", &interpolate_path_cuda); }

}  // namespace aieg
