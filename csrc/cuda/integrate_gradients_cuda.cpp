// torch side of the integrate_gradients CUDA kernel; compiled by the host compiler, only in CUDA builds
// (AIEG_WITH_CUDA). prepare_integrate_gradients (integrate_gradients.cpp, shared with the CPU op) checks and
// lays out the arguments; this file selects the device, passes PyTorch's current stream and calls the
// torch-free launcher. The stream comes from c10::cuda::getCurrentCUDAStream (what
// at::cuda::getCurrentCUDAStream forwards to): ATen/cuda/CUDAContext.h would also require the cuBLAS/cuSPARSE
// headers.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

Tensor integrate_gradients_cuda(const Tensor& grads, const Tensor& weights, const Tensor& delta,
                                c10::string_view reduce) {
  const c10::cuda::CUDAGuard guard(grads.device());
  auto r = prepare_integrate_gradients(grads, weights, delta, sv(reduce));
  const int err = launch_integrate_gradients(r.p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "integrate_gradients CUDA kernel failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CUDA, m) { m.impl("integrate_gradients", &integrate_gradients_cuda); }

}  // namespace aieg
