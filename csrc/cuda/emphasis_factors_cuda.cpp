// torch side of the emphasis_factors CUDA kernel; compiled by the host compiler, only in CUDA builds
// (AIEG_WITH_CUDA). prepare_emphasis_factors (emphasis_factors.cpp, shared with the CPU op) checks and lays
// out the arguments; this file selects the device, passes PyTorch's current stream and calls the torch-free
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

Tensor emphasis_factors_cuda(const Tensor& path_logits, const Tensor& alphas, const Tensor& widths,
                             c10::string_view mode, c10::string_view sign, c10::string_view norm,
                             const OptTensor& slopes) {
  const c10::cuda::CUDAGuard guard(path_logits.device());
  auto r = prepare_emphasis_factors(path_logits, alphas, widths, sv(mode), sv(sign), sv(norm), slopes);
  const int err = launch_emphasis_factors(r.p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "emphasis_factors CUDA kernel failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CUDA, m) { m.impl("emphasis_factors", &emphasis_factors_cuda); }

}  // namespace aieg
