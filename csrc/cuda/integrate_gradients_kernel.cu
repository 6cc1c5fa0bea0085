// integrate_gradients CUDA kernels. Torch-free: includes only CUDA headers and csrc/aieg/*.h, and
// is compiled by nvcc alone in CI.
//  * reduce="none": one thread per (l, j); the m path steps are read with coalesced loads.
//  * reduce="sum": one block per row l; threads stride over d, then a warp-shuffle block reduction.
// Accumulation in fp32 (fp64 for fp64 grads).
#include "aieg/cuda_common.h"
#include "aieg/integrate_gradients.h"

namespace aieg {
namespace {

template <typename T, typename D>
__global__ void integrate_gradients_none_kernel(IntegrateGradientsParams p) {
  using acc = acc_t<T>;
  const T* g = static_cast<const T*>(p.grads);
  const acc* w = static_cast<const acc*>(p.weights);
  const D* dl = static_cast<const D*>(p.delta);
  acc* out = static_cast<acc*>(p.out);
  const int64_t n = p.L * p.d;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t l = idx / p.d, j = idx - l * p.d;
    const T* gp = g + l * p.grads_stride_l + j;
    acc s = acc(0);
#pragma unroll 4
    for (int64_t k = 0; k < p.m; ++k) s += w[k] * cuda::load(gp, k * p.grads_stride_m);
    out[idx] = static_cast<acc>(cuda::load(dl, l * p.delta_stride_l + j)) * s;
  }
}

template <typename T, typename D>
__global__ void integrate_gradients_sum_kernel(IntegrateGradientsParams p) {
  using acc = acc_t<T>;
  __shared__ acc smem[32];
  const T* g = static_cast<const T*>(p.grads);
  const acc* w = static_cast<const acc*>(p.weights);
  const D* dl = static_cast<const D*>(p.delta);
  acc* out = static_cast<acc*>(p.out);
  for (int64_t l = blockIdx.x; l < p.L; l += gridDim.x) {
    const T* gl = g + l * p.grads_stride_l;
    const D* dlr = dl + l * p.delta_stride_l;
    acc part = acc(0);
    for (int64_t j = threadIdx.x; j < p.d; j += blockDim.x) {
      acc s = acc(0);
#pragma unroll 4
      for (int64_t k = 0; k < p.m; ++k) s += w[k] * cuda::load(gl, k * p.grads_stride_m + j);
      part += static_cast<acc>(cuda::load(dlr, j)) * s;
    }
    const acc total = cuda::block_reduce(part, cuda::SumOp{}, smem);
    if (threadIdx.x == 0) out[l] = total;
  }
}

}  // namespace

int launch_integrate_gradients(const IntegrateGradientsParams& p, void* stream) {
  if (p.L == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  cuda::dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const bool same = p.delta_dtype == p.dtype;
    if (p.reduce_sum) {
      // Fewer threads for short rows, so small d does not leave most of a block idle.
      const int threads = p.d >= 256 ? 256 : (p.d >= 128 ? 128 : (p.d >= 64 ? 64 : 32));
      const unsigned grid = static_cast<unsigned>(p.L < 1048576 ? p.L : 1048576);
      if (same)
        integrate_gradients_sum_kernel<T, T><<<grid, threads, 0, s>>>(p);
      else
        integrate_gradients_sum_kernel<T, A><<<grid, threads, 0, s>>>(p);
    } else {
      if (p.d == 0) return;
      const unsigned grid = static_cast<unsigned>(cuda::grid_for(p.L * p.d));
      if (same)
        integrate_gradients_none_kernel<T, T><<<grid, cuda::kThreads, 0, s>>>(p);
      else
        integrate_gradients_none_kernel<T, A><<<grid, cuda::kThreads, 0, s>>>(p);
    }
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace aieg
