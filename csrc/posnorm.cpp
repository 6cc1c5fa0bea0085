// posnorm, device-neutral part: prepare_posnorm checks the arguments, lays out the scores and the
// broadcast valid_mask and allocates the output on the inputs' device. Shared by the CPU op
// (cpu/posnorm_cpu.cpp) and the CUDA binding (cuda/posnorm_cuda.cpp).
#include <ATen/ops/empty.h>

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

}  // namespace aieg
