// hvp_l1_mean on the CPU: S_i = (1/m) Σ_k Σ_j |hvps[k, i, j]|, reading hvps once. The arguments
// are checked and laid out by prepare_hvp_l1_mean (hvp_l1_mean.cpp, shared with the CUDA binding).
//
// Tokens run in parallel on ATen's OpenMP pool; one token's m·d values are summed by one thread
// in fp64 over 8 lanes in a fixed order, so the result does not depend on the thread count or
// on the ISA level the hot loop was compiled for.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>

#include "aieg/math.h"
#include "cpu/vectorize.h"
#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

// Σ_j |x_j| over n contiguous values, in fp64.
template <typename T>
inline double abs_sum_impl(const T* AIEG_RESTRICT x, int64_t n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lanes[k] += static_cast<double>(abs_val(load_acc(x[i + k])));
  double total = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (; i < n; ++i) total += static_cast<double>(abs_val(load_acc(x[i])));
  return total;
}

AIEG_CPU_CLONES double abs_sum(const float* x, int64_t n) { return abs_sum_impl(x, n); }
AIEG_CPU_CLONES double abs_sum(const double* x, int64_t n) { return abs_sum_impl(x, n); }
AIEG_CPU_CLONES double abs_sum(const c10::BFloat16* x, int64_t n) { return abs_sum_impl(x, n); }

// float16: convert blocks to float first (F16C when the CPU has it), then the float loop. The
// blocks are a multiple of 8 values, so the lanes see the same values in the same order as one pass.
constexpr int64_t kHalfBlock = 1024;

double abs_sum(const c10::Half* x, int64_t n) {
  float buf[kHalfBlock];
  double total = 0;
  for (int64_t o = 0; o < n; o += kHalfBlock) {
    const int64_t len = std::min(kHalfBlock, n - o);
    half_to_float(x + o, buf, len);
    total += abs_sum(static_cast<const float*>(buf), len);
  }
  return total;
}

template <typename scalar_t>
void hvp_l1_mean_kernel(const HvpL1MeanParams& p) {
  using acc = acc_t<scalar_t>;
  const auto* x = static_cast<const scalar_t*>(p.hvps);
  auto* out = static_cast<acc*>(p.out);
  const int64_t work = std::max<int64_t>(1, p.m * p.d);
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / work);
  at::parallel_for(0, p.n, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      double total = 0;
      for (int64_t k = 0; k < p.m; ++k) total += abs_sum(x + k * p.stride_m + i * p.stride_n, p.d);
      out[i] = static_cast<acc>(total) / static_cast<acc>(p.m);
    }
  });
}

Tensor hvp_l1_mean_cpu(const Tensor& hvps) {
  auto r = prepare_hvp_l1_mean(hvps);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, r.hvps.scalar_type(), "hvp_l1_mean_cpu",
                                  [&] { hvp_l1_mean_kernel<scalar_t>(r.p); });
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("hvp_l1_mean", &hvp_l1_mean_cpu); }

}  // namespace aieg
