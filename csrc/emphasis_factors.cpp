// emphasis_factors, device-neutral part: prepare_emphasis_factors parses the options, checks the
// arguments (and their combinations), casts the inputs to the accumulation dtype and allocates the
// output on their device.
// Shared by the CPU op (cpu/emphasis_factors_cpu.cpp) and the CUDA binding (cuda/emphasis_factors_cuda.cpp).
#include <ATen/ops/empty.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {

EmphasisFactorsPrepared prepare_emphasis_factors(const Tensor& path_logits, const Tensor& alphas, const Tensor& widths,
                                                 std::string_view mode, std::string_view sign, std::string_view norm,
                                                 const OptTensor& slopes) {
  EmphasisFactorsPrepared r;
  EmphasisFactorsParams& p = r.p;
  p.mode = parse_choice<EfMode>("mode", mode,
                                {{"fd", EfMode::Fd},
                                 {"autograd", EfMode::Autograd},
                                 {"none", EfMode::None},
                                 {"completeness", EfMode::Completeness}});
  p.sign = parse_choice<EfSign>(
      "sign", sign,
      {{"abs", EfSign::Abs}, {"signed", EfSign::Signed}, {"relu", EfSign::Relu}, {"minmax", EfSign::MinMax}});
  p.norm = parse_choice<EfNorm>("norm", norm, {{"l1", EfNorm::L1}, {"none", EfNorm::None}});
  // the combinations of reference.check_emphasis_options, in its words
  if (p.mode != EfMode::Completeness) {
    TORCH_CHECK_VALUE(!slopes.has_value(), "slopes is only read by mode='completeness', got a tensor with mode='",
                      mode, "'");
  } else {
    TORCH_CHECK_VALUE(slopes.has_value(),
                      "slopes (the autograd slopes G_m·Δ) is required for mode='completeness', got None");
    TORCH_CHECK_VALUE(p.sign == EfSign::Abs,
                      "sign must be 'abs' for mode='completeness' (its weights are never negative), got '", sign, "'");
    TORCH_CHECK_VALUE(p.norm == EfNorm::None,
                      "norm must be 'none' for mode='completeness' (a normalisation would undo its completeness), "
                      "got '",
                      norm, "'");
  }
  check_real(path_logits, "path_logits");
  check_real(alphas, "alphas");
  check_real(widths, "widths");
  if (slopes.has_value()) check_real(*slopes, "slopes");
  const int64_t M = path_logits.numel();
  if (slopes.has_value()) {
    TORCH_CHECK_VALUE(alphas.numel() == M && widths.numel() == M && slopes->numel() == M,
                      "path_logits, alphas, widths and slopes must have the same length, got ", M, ", ",
                      alphas.numel(), ", ", widths.numel(), ", ", slopes->numel());
    check_same_device(*slopes, path_logits, "slopes", "path_logits");
  } else {
    TORCH_CHECK_VALUE(alphas.numel() == M && widths.numel() == M,
                      "path_logits, alphas and widths must have the same length, got ", M, ", ", alphas.numel(), ", ",
                      widths.numel());
  }
  check_same_device(alphas, path_logits, "alphas", "path_logits");
  check_same_device(widths, path_logits, "widths", "path_logits");
  const at::ScalarType acc = acc_scalar_type(path_logits.scalar_type());
  r.logits = path_logits.reshape({-1}).to(acc).contiguous();
  r.alphas = alphas.reshape({-1}).to(acc).contiguous();
  r.widths = widths.reshape({-1}).to(acc).contiguous();
  if (slopes.has_value()) r.slopes = slopes->reshape({-1}).to(acc).contiguous();
  r.out = at::empty({M}, path_logits.options().dtype(acc));
  p.logits = r.logits.const_data_ptr();
  p.alphas = r.alphas.const_data_ptr();
  p.widths = r.widths.const_data_ptr();
  p.slopes = r.slopes.defined() ? r.slopes.const_data_ptr() : nullptr;
  p.out = r.out.mutable_data_ptr();
  p.M = M;
  p.dtype = dtype_of(acc);
  return r;
}

}  // namespace aieg
