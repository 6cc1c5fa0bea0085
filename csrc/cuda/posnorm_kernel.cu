// posnorm CUDA kernel. Torch-free: includes only CUDA headers and csrc/aieg/*.h, and is compiled
// by nvcc alone in CI. One block per row: block reductions (warp shuffles) give the row statistics,
// then every thread writes its positions with the shared posnorm_value().
#include "aieg/cuda_common.h"
#include "aieg/posnorm.h"

namespace aieg {
namespace {

template <typename T>
__global__ void posnorm_kernel(PosnormParams p) {
  using acc = acc_t<T>;
  __shared__ double smem_d[32];
  __shared__ acc smem_a[32];
  __shared__ int smem_i[32];
  __shared__ long long smem_l[32];
  const T* s = static_cast<const T*>(p.scores);
  acc* out = static_cast<acc*>(p.out);
  const int64_t L = p.L;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T* sr = s + r * L;
    const bool* vr = p.valid != nullptr ? p.valid + r * L : nullptr;
    long long count = 0;
    int nonfinite = 0;
    acc lo = pos_inf<acc>(), hi = -pos_inf<acc>();
    double abs_sum = 0;  // rounded once to the accumulation dtype, like torch's accurate sum
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
      if (vr != nullptr && !vr[j]) continue;
      const acc x = cuda::load(sr, j);
      count += 1;
      nonfinite |= is_finite(x) ? 0 : 1;
      const acc c = posnorm_clean(x, true);
      lo = c < lo ? c : lo;
      hi = c > hi ? c : hi;
      abs_sum += static_cast<double>(abs_val(c));
    }
    PosnormStats<acc> st;
    st.count = cuda::block_reduce(count, cuda::SumOp{}, smem_l);
    st.nonfinite = cuda::block_reduce(nonfinite, cuda::OrOp{}, smem_i) != 0;
    st.lo = cuda::block_reduce(lo, cuda::MinOp{}, smem_a);
    st.hi = cuda::block_reduce(hi, cuda::MaxOp{}, smem_a);
    st.abs_sum_wide = cuda::block_reduce(abs_sum, cuda::SumOp{}, smem_d);
    st.abs_sum = static_cast<acc>(st.abs_sum_wide);
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x)
      out[r * L + j] = posnorm_value(cuda::load(sr, j), vr == nullptr || vr[j], st, p.mode);
  }
}

}  // namespace

int launch_posnorm(const PosnormParams& p, void* stream) {
  if (p.rows == 0 || p.L == 0) return 0;
  const int threads = p.L >= 256 ? 256 : (p.L >= 128 ? 128 : (p.L >= 64 ? 64 : 32));
  const unsigned grid = static_cast<unsigned>(p.rows < 1048576 ? p.rows : 1048576);
  auto s = static_cast<cudaStream_t>(stream);
  cuda::dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    posnorm_kernel<T><<<grid, threads, 0, s>>>(p);
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace aieg
