// attention_gradient_product CUDA kernels. Torch-free: includes only CUDA headers and
// csrc/aieg/*.h, and is compiled by nvcc alone in CI.
// One thread per (q, k) element and batch chunk (blockIdx.y) sums the heads and the batch with
// coalesced loads; when B is split (small Q·K, e.g. the last query row) each chunk writes a partial
// [Q, K] into the workspace and a second kernel adds the chunks in order (deterministic, no atomics).
#include "aieg/attention_gradient_product.h"
#include "aieg/cuda_common.h"

namespace aieg {
namespace {

template <typename T, typename Gt>
__global__ void agp_kernel(AttentionGradientProductParams p, int64_t chunks) {
  using acc = acc_t<T>;
  const T* A = static_cast<const T*>(p.attn);
  const Gt* G = static_cast<const Gt*>(p.grad);
  const acc* w = static_cast<const acc*>(p.weights);
  acc* dst = chunks > 1 ? static_cast<acc*>(p.workspace) : static_cast<acc*>(p.out);
  const int64_t n = p.Q * p.K;
  const int64_t per = ceil_div(p.B, chunks);
  const int64_t c = blockIdx.y;
  const int64_t b0 = c * per, b1 = (b0 + per < p.B) ? b0 + per : p.B;
  const acc Hf = static_cast<acc>(p.H);
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t q = idx / p.K, k = idx - q * p.K;
    acc res = acc(0);
    for (int64_t b = b0; b < b1; ++b) {
      const T* a = A + b * p.attn_stride[0] + q * p.attn_stride[2] + k;
      const Gt* g = G != nullptr ? G + b * p.grad_stride[0] + q * p.grad_stride[2] + k : nullptr;
      acc sa = acc(0), sg = acc(0);
      for (int64_t h = 0; h < p.H; ++h) {
        const acc av = cuda::load(a, h * p.attn_stride[1]);
        if (p.reduce == AgpReduce::Attention) {
          sa += av;
        } else if (p.reduce == AgpReduce::ProductOfMeans) {
          sa += av;
          sg += cuda::load(g, h * p.grad_stride[1]);
        } else {
          sg += av * cuda::load(g, h * p.grad_stride[1]);
        }
      }
      res += w[b] * agp_per_batch(sa, sg, Hf, p.reduce);
    }
    dst[c * n + idx] = res;
  }
}

template <typename acc>
__global__ void sum_chunks_kernel(const acc* ws, acc* out, int64_t n, int64_t chunks) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    acc s = ws[idx];
    for (int64_t c = 1; c < chunks; ++c) s += ws[c * n + idx];
    out[idx] = s;
  }
}

}  // namespace

int launch_attention_gradient_product(const AttentionGradientProductParams& p, void* stream) {
  const int64_t n = p.Q * p.K;
  if (n == 0) return 0;
  const int64_t chunks = agp_cuda_chunks(p.B, p.Q, p.K);
  if (chunks > 1 && p.workspace == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(cuda::grid_for(n)), static_cast<unsigned>(chunks));
  cuda::dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    if (p.grad_dtype == p.dtype)
      agp_kernel<T, T><<<grid, cuda::kThreads, 0, s>>>(p, chunks);
    else
      agp_kernel<T, A><<<grid, cuda::kThreads, 0, s>>>(p, chunks);
    if (chunks > 1)
      sum_chunks_kernel<A><<<static_cast<unsigned>(cuda::grid_for(n)), cuda::kThreads, 0, s>>>(
          static_cast<const A*>(p.workspace), static_cast<A*>(p.out), n, chunks);
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace aieg
