// posnorm on the CPU: argument preparation (shared with the CUDA binding) and a row-parallel
// kernel (one pass for the row statistics, one for the output).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>

#include "aieg/math.h"
#include "cpu/vectorize.h"
#include "ops.h"
#include "torch_utils.h"

namespace aieg {

PosnormPrepared prepare_posnorm(const Tensor& scores, const OptTensor& valid_mask, std::string_view mode) {
  const PosnormMode md = parse_choice<PosnormMode>("mode", mode,
                                                   {{"minmax", PosnormMode::MinMax},
                                                    {"relu_max", PosnormMode::ReluMax},
                                                    {"abs_sum", PosnormMode::AbsSum},
                                                    {"none", PosnormMode::None}});
  TORCH_CHECK_VALUE(scores.dim() >= 1, "scores should have at least one dimension [..., L], got shape ",
                    scores.sizes());
  check_float(scores, "scores");
  PosnormPrepared r;
  r.scores = scores.contiguous();
  if (valid_mask.has_value()) {
    const Tensor& vm = *valid_mask;
    bool ok = vm.dim() <= scores.dim();
    for (int64_t i = 1; ok && i <= vm.dim(); ++i)
      ok = vm.size(-i) == 1 || vm.size(-i) == scores.size(-i);
    TORCH_CHECK_VALUE(ok, "valid_mask should be broadcastable to scores' shape ", scores.sizes(), ", got shape ",
                      vm.sizes());
    check_same_device(vm, scores, "valid_mask", "scores");
    r.valid = vm.to(at::kBool).expand(scores.sizes()).contiguous();
  }
  const at::ScalarType acc = acc_scalar_type(scores.scalar_type());
  r.out = at::empty(scores.sizes(), scores.options().dtype(acc));
  PosnormParams& p = r.p;
  p.scores = r.scores.const_data_ptr();
  p.valid = r.valid.defined() ? r.valid.const_data_ptr<bool>() : nullptr;
  p.out = r.out.mutable_data_ptr();
  p.L = scores.size(-1);
  p.rows = p.L > 0 ? scores.numel() / p.L : 0;
  p.dtype = dtype_of(scores.scalar_type());
  p.mode = md;
  return r;
}

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
      PosnormStats<acc> st{0, false, pos_inf<acc>(), -pos_inf<acc>(), acc(0)};
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
      st.abs_sum = static_cast<acc>(abs_sum);
      for (int64_t j = 0; j < L; ++j)
        orow[j] = posnorm_value(load_acc(sr[j]), vr ? vr[j] : true, st, p.mode);
    }
  });
}

Tensor posnorm_cpu(const Tensor& scores, const OptTensor& valid_mask, c10::string_view mode) {
  auto r = prepare_posnorm(scores, valid_mask, std::string_view(mode.data(), mode.size()));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, r.scores.scalar_type(), "posnorm_cpu",
                                  [&] { posnorm_kernel<scalar_t>(r.p); });
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("posnorm", &posnorm_cpu); }

}  // namespace aieg
