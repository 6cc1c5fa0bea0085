// torch side of adaptive_alphas for CUDA tensors; compiled by the host compiler, only in CUDA builds
// (AIEG_WITH_CUDA). There is no CUDA kernel: the allocation is O(N + M) scalar fp64 work, so
// adaptive_alphas_host (adaptive_alphas.cpp, shared with the CPU op) runs it on the host after
// copying the N pilot values over (as the reference does), and the result (or the uniform fallback,
// built with torch.linspace like the reference) is placed on the device.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

std::tuple<Tensor, Tensor> adaptive_alphas_cuda(const Tensor& pilot_logits, int64_t n_steps, c10::string_view alloc,
                                                bool idg_compat_quirk) {
  const c10::cuda::CUDAGuard guard(pilot_logits.device());
  return adaptive_alphas_host(pilot_logits, n_steps, sv(alloc), idg_compat_quirk);
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CUDA, m) { m.impl("adaptive_alphas", &adaptive_alphas_cuda); }

}  // namespace aieg
