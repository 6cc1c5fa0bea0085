// emphasis_factors CUDA kernel. Torch-free: includes only CUDA headers and csrc/aieg/*.h, and is
// compiled by nvcc alone in CI. M (path steps) is small: a single block computes the non-finite
// flag, the minmax extrema and Σ|w| with block reductions, then writes EF with the shared formulas
// (the completeness mode needs no reduction beyond the non-finite flag).
#include "aieg/cuda_common.h"
#include "aieg/emphasis_factors.h"

namespace aieg {
namespace {

template <typename acc>
__global__ void emphasis_factors_kernel(EmphasisFactorsParams p) {
  __shared__ double smem_d[32];
  __shared__ acc smem_a[32];
  __shared__ int smem_i[32];
  const acc* f = static_cast<const acc*>(p.logits);
  const acc* a = static_cast<const acc*>(p.alphas);
  const acc* d = static_cast<const acc*>(p.widths);
  const acc* s = static_cast<const acc*>(p.slopes);
  acc* out = static_cast<acc*>(p.out);
  const int64_t M = p.M;
  int bad = 0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x)
    bad |= (is_finite(f[i]) && is_finite(a[i]) && is_finite(d[i]) && (s == nullptr || is_finite(s[i]))) ? 0 : 1;
  if (cuda::block_reduce(bad, cuda::OrOp{}, smem_i) != 0) {
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) out[i] = quiet_nan<acc>();
    return;
  }
  if (p.mode == EfMode::Completeness) {  // element-wise: no extrema, no total
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) out[i] = ef_completeness_weight(f, a, s, i);
    return;
  }
  acc lo = pos_inf<acc>(), hi = -pos_inf<acc>();
  if (p.mode != EfMode::None && p.sign == EfSign::MinMax) {
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const acc w = ef_raw_weight(f, a, d, i, p.mode);
      lo = nan_min(lo, w);
      hi = nan_max(hi, w);
    }
    lo = cuda::block_reduce(lo, cuda::MinOp{}, smem_a);
    hi = cuda::block_reduce(hi, cuda::MaxOp{}, smem_a);
  }
  double total = 0;  // Σ|w|, rounded once to the accumulation dtype
  if (p.norm == EfNorm::L1) {
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x)
      total += static_cast<double>(abs_val(ef_weight(f, a, d, i, p, lo, hi)));
    total = cuda::block_reduce(total, cuda::SumOp{}, smem_d);
  }
  const acc total_acc = static_cast<acc>(total);
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x)
    out[i] = ef_normalise(ef_weight(f, a, d, i, p, lo, hi), total_acc, M, p.norm);
}

}  // namespace

int launch_emphasis_factors(const EmphasisFactorsParams& p, void* stream) {
  if (p.M == 0) return 0;
  const int threads = p.M >= 256 ? 256 : (p.M >= 64 ? 64 : 32);
  auto s = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::F64)
    emphasis_factors_kernel<double><<<1, threads, 0, s>>>(p);
  else
    emphasis_factors_kernel<float><<<1, threads, 0, s>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace aieg
