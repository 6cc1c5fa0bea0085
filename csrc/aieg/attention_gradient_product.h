// attention_gradient_product: params and the per-batch combination (spec §4).
// Torch-free; shared by the CPU kernel and the CUDA kernel.
#pragma once

#include "aieg/macros.h"

namespace aieg {

enum class AgpReduce : int32_t { ProductOfMeans = 0, MeanOfProducts = 1, Attention = 2 };

struct AttentionGradientProductParams {
  const void* attn = nullptr;     // [B, H, Q, K], `dtype`; innermost stride 1
  const void* grad = nullptr;     // [B, H, Q, K], `grad_dtype`; innermost stride 1; nullptr for Attention
  const void* weights = nullptr;  // [B], contiguous, accumulation dtype
  void* out = nullptr;            // [Q, K], contiguous, accumulation dtype
  void* workspace = nullptr;      // CUDA only: agp_cuda_chunks(p) * Q * K accumulation-dtype values
  int64_t B = 0;
  int64_t H = 0;
  int64_t Q = 0;
  int64_t K = 0;
  int64_t attn_stride[3] = {0, 0, 0};  // b, h, q strides in elements
  int64_t grad_stride[3] = {0, 0, 0};
  DType dtype = DType::F32;       // attn
  DType grad_dtype = DType::F32;  // either `dtype` or the accumulation dtype
  AgpReduce reduce = AgpReduce::ProductOfMeans;
};

// The per-batch term from the head sums: sum_a = Σ_h A, sum_g = Σ_h ∂A (ProductOfMeans) or
// Σ_h A·∂A (MeanOfProducts). Same operation order as the reference (mean = sum / H).
template <typename acc>
AIEG_HOST_DEVICE inline acc agp_per_batch(acc sum_a, acc sum_g, acc H, AgpReduce r) {
  switch (r) {
    case AgpReduce::ProductOfMeans:
      return (sum_a / H) * (sum_g / H);
    case AgpReduce::MeanOfProducts:
      return sum_g / H;
    case AgpReduce::Attention:
    default:
      return sum_a / H;
  }
}

// Number of batch chunks the CUDA kernel splits B into (each chunk writes its own Q×K partial
// sum into the workspace; a second pass adds them in order, so the result is deterministic).
inline int64_t agp_cuda_chunks(int64_t B, int64_t Q, int64_t K) {
  const int64_t n = Q * K;
  if (B <= 1 || n <= 0) return 1;
  const int64_t target_threads = int64_t(1) << 18;  // enough to fill a large GPU
  int64_t chunks = (target_threads + n - 1) / n;
  if (chunks > B) chunks = B;
  if (chunks > 64) chunks = 64;
  return chunks < 1 ? 1 : chunks;
}

// CUDA launcher (csrc/cuda/attention_gradient_product_kernel.cu). Returns a cudaError_t value.
int launch_attention_gradient_product(const AttentionGradientProductParams& p, void* stream);

}  // namespace aieg
