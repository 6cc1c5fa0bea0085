// hvp_l1_mean CUDA kernel: S_i = (1/m) Σ_k Σ_j |hvps[k, i, j]|. Torch-free: includes only CUDA
// headers and csrc/aieg/*.h, and is compiled by nvcc alone in CI. One block per token (grid-stride);
// the threads stride over d with coalesced loads for each probe, summing in fp64, then a
// warp-shuffle block reduction.
#include "aieg/cuda_common.h"
#include "aieg/hvp_l1_mean.h"

namespace aieg {
namespace {

template <typename T>
__global__ void hvp_l1_mean_kernel(HvpL1MeanParams p) {
  using acc = acc_t<T>;
  __shared__ double smem[32];
  const T* x = static_cast<const T*>(p.hvps);
  acc* out = static_cast<acc*>(p.out);
  for (int64_t i = blockIdx.x; i < p.n; i += gridDim.x) {
    double part = 0;
    for (int64_t k = 0; k < p.m; ++k) {
      const T* row = x + k * p.stride_m + i * p.stride_n;
      for (int64_t j = threadIdx.x; j < p.d; j += blockDim.x) part += static_cast<double>(abs_val(cuda::load(row, j)));
    }
    const double total = cuda::block_reduce(part, cuda::SumOp{}, smem);
    if (threadIdx.x == 0) out[i] = static_cast<acc>(total) / static_cast<acc>(p.m);
  }
}

}  // namespace

int launch_hvp_l1_mean(const HvpL1MeanParams& p, void* stream) {
  if (p.n == 0) return 0;
  // Fewer threads for short blocks, so a small d does not leave most of a block idle.
  const int threads = p.d >= 256 ? 256 : (p.d >= 128 ? 128 : (p.d >= 64 ? 64 : 32));
  const unsigned grid = static_cast<unsigned>(p.n < 1048576 ? p.n : 1048576);
  auto s = static_cast<cudaStream_t>(stream);
  cuda::dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    hvp_l1_mean_kernel<T><<<grid, threads, 0, s>>>(p);
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace aieg
