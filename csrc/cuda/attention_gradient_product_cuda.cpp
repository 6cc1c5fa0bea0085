// torch side of the attention_gradient_product CUDA kernel; compiled by the host compiler, only in CUDA
// builds (AIEG_WITH_CUDA). prepare_attention_gradient_product (attention_gradient_product.cpp, shared with
// the CPU op) checks and lays out the arguments; this file selects the device, passes PyTorch's current
// stream and calls the torch-free launcher. The stream comes from c10::cuda::getCurrentCUDAStream (what
// at::cuda::getCurrentCUDAStream forwards to): ATen/cuda/CUDAContext.h would also require the cuBLAS/cuSPARSE
// headers.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

Tensor attention_gradient_product_cuda(const Tensor& attn, const OptTensor& grad, const OptTensor& weights,
                                       c10::string_view reduce) {
  const c10::cuda::CUDAGuard guard(attn.device());
  auto r = prepare_attention_gradient_product(attn, grad, weights, sv(reduce));
  // Workspace for the per-chunk partial sums when B is split (see agp_cuda_chunks).
  const int64_t chunks = agp_cuda_chunks(r.p.B, r.p.Q, r.p.K);
  Tensor workspace;
  if (chunks > 1) {
    workspace = at::empty({chunks, r.p.Q, r.p.K}, r.out.options());
    r.p.workspace = workspace.mutable_data_ptr();
  }
  const int err = launch_attention_gradient_product(r.p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "attention_gradient_product CUDA kernel failed: ",
              cudaGetErrorString(static_cast<cudaError_t>(err)));
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CUDA, m) { m.impl("attention_gradient_product", &attention_gradient_product_cuda); }

}  // namespace aieg
