// interpolate_path CUDA kernel. Torch-free: includes only CUDA headers and csrc/aieg/*.h, and is
// compiled by nvcc alone in CI. One thread per (l, j) element reads E and E′ once (coalesced) and
// writes the element for the path steps k = blockIdx.y, blockIdx.y + gridDim.y, ...
#include "aieg/cuda_common.h"
#include "aieg/interpolate_path.h"

namespace aieg {
namespace {

template <typename T, typename Bt>
__global__ void interpolate_path_kernel(InterpolatePathParams p) {
  using acc = acc_t<T>;
  const T* e = static_cast<const T*>(p.input);
  const Bt* b = static_cast<const Bt*>(p.baseline);
  const acc* alphas = static_cast<const acc*>(p.alphas);
  T* out = static_cast<T*>(p.out);
  const int64_t n = p.L * p.d;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t l = idx / p.d, j = idx - l * p.d;
    const T e_raw = e[l * p.input_stride_l + j];
    const acc ev = cuda::load(e, l * p.input_stride_l + j);
    const acc bv = cuda::load(b, l * p.baseline_stride_l + j);
    const bool fixed = p.fixed != nullptr && p.fixed[l];
    for (int64_t k = blockIdx.y; k < p.m; k += gridDim.y)
      out[k * n + idx] = fixed ? e_raw : cuda::to_storage<T>(interpolate_point(ev, bv, alphas[k]));
  }
}

}  // namespace

int launch_interpolate_path(const InterpolatePathParams& p, void* stream) {
  const int64_t n = p.L * p.d;
  if (n == 0 || p.m == 0) return 0;
  const int64_t gx = cuda::grid_for(n);
  int64_t gy = ceil_div(4096, gx);  // enough blocks to fill the GPU when L·d is small
  gy = gy > p.m ? p.m : (gy > 65535 ? 65535 : gy);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  auto s = static_cast<cudaStream_t>(stream);
  cuda::dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.baseline_dtype == p.dtype)
      interpolate_path_kernel<T, T><<<grid, cuda::kThreads, 0, s>>>(p);
    else
      interpolate_path_kernel<T, acc_t<T>><<<grid, cuda::kThreads, 0, s>>>(p);
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace aieg
