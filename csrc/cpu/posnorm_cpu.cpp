// posnorm on the CPU: a row-parallel kernel (one pass for the row statistics, one for the output).
// The arguments are checked and laid out by prepare_posnorm (posnorm.cpp, shared with the CUDA
// binding).
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

template <typename scalar_t>
void posnorm_kernel(const PosnormParams& p) {
  using acc = acc_t<scalar_t>;
  const auto* s = static_cast<const scalar_t*>(p.scores);
  auto* out = static_cast<acc*>(p.out);
  const int64_t L = p.L;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(L, 1));
  at::parallel_for(0, p.rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const scalar_t* sr = s + r * L;
      const bool* vr = p.valid ? p.valid + r * L : nullptr;
      acc* orow = out + r * L;
      PosnormStats<acc> st{0, false, pos_inf<acc>(), -pos_inf<acc>(), acc(0), 0.0};
      double abs_sum = 0;  // rounded once to the accumulation dtype, like torch's accurate sum
      for (int64_t j = 0; j < L; ++j) {
        const bool v = vr ? vr[j] : true;
        if (!v) continue;
        const acc x = load_acc(sr[j]);
        st.count += 1;
        st.nonfinite = st.nonfinite || !is_finite(x);
        const acc c = posnorm_clean(x, true);
        st.lo = std::min(st.lo, c);
        st.hi = std::max(st.hi, c);
        abs_sum += static_cast<double>(abs_val(c));
      }
      st.abs_sum_wide = abs_sum;
      st.abs_sum = static_cast<acc>(abs_sum);
      for (int64_t j = 0; j < L; ++j)
        orow[j] = posnorm_value(load_acc(sr[j]), vr ? vr[j] : true, st, p.mode);
    }
  });
}

Tensor posnorm_cpu(const Tensor& scores, const OptTensor& valid_mask, c10::string_view mode) {
  auto r = prepare_posnorm(scores, valid_mask, sv(mode));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, r.scores.scalar_type(), "posnorm_cpu",
                                  [&] { posnorm_kernel<scalar_t>(r.p); });
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("posnorm", &posnorm_cpu); }

}  // namespace aieg
