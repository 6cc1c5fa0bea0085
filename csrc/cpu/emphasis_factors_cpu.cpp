// emphasis_factors on the CPU: a serial kernel (M is the number of path steps, O(M) work). The
// arguments are checked and laid out by prepare_emphasis_factors (emphasis_factors.cpp, shared with
// the CUDA binding).
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <algorithm>

#include "aieg/emphasis_factors.h"
#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

template <typename acc>
void emphasis_factors_kernel(const EmphasisFactorsParams& p) {
  const auto* f = static_cast<const acc*>(p.logits);
  const auto* a = static_cast<const acc*>(p.alphas);
  const auto* d = static_cast<const acc*>(p.widths);
  const auto* s = static_cast<const acc*>(p.slopes);
  auto* out = static_cast<acc*>(p.out);
  const int64_t M = p.M;
  if (M == 0) return;
  for (int64_t i = 0; i < M; ++i) {
    if (!is_finite(f[i]) || !is_finite(a[i]) || !is_finite(d[i]) || (s != nullptr && !is_finite(s[i]))) {
      std::fill(out, out + M, quiet_nan<acc>());
      return;
    }
  }
  if (p.mode == EfMode::Completeness) {
    for (int64_t i = 0; i < M; ++i) out[i] = ef_completeness_weight(f, a, s, i);
    return;
  }
  acc lo = pos_inf<acc>(), hi = -pos_inf<acc>();
  if (p.mode != EfMode::None && p.sign == EfSign::MinMax) {
    for (int64_t i = 0; i < M; ++i) {
      const acc w = ef_raw_weight(f, a, d, i, p.mode);
      lo = nan_min(lo, w);
      hi = nan_max(hi, w);
    }
  }
  double total = 0;  // Σ|w|, rounded once to the accumulation dtype
  if (p.norm == EfNorm::L1)
    for (int64_t i = 0; i < M; ++i) total += static_cast<double>(abs_val(ef_weight(f, a, d, i, p, lo, hi)));
  const acc total_acc = static_cast<acc>(total);
  for (int64_t i = 0; i < M; ++i) out[i] = ef_normalise(ef_weight(f, a, d, i, p, lo, hi), total_acc, M, p.norm);
}

Tensor emphasis_factors_cpu(const Tensor& path_logits, const Tensor& alphas, const Tensor& widths,
                            c10::string_view mode, c10::string_view sign, c10::string_view norm,
                            const OptTensor& slopes) {
  auto r = prepare_emphasis_factors(path_logits, alphas, widths, sv(mode), sv(sign), sv(norm), slopes);
  if (r.p.dtype == DType::F64)
    emphasis_factors_kernel<double>(r.p);
  else
    emphasis_factors_kernel<float>(r.p);
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("emphasis_factors", &emphasis_factors_cpu); }

}  // namespace aieg
