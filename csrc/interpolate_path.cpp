// interpolate_path, device-neutral part: prepare_interpolate_path checks the arguments, casts and
// lays out the inputs and allocates the [m, L, d] output on the inputs' device. Shared by the CPU
// op (cpu/interpolate_path_cpu.cpp) and the CUDA binding (cuda/interpolate_path_cuda.cpp).
#include <ATen/ops/empty.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {

InterpolatePathPrepared prepare_interpolate_path(const Tensor& input_embeds, const Tensor& baseline_embeds,
                                                 const Tensor& alphas, const OptTensor& fixed_mask) {
  TORCH_CHECK_VALUE(input_embeds.dim() == 2, "input_embeds should have shape [L, d], got shape ",
                    input_embeds.sizes());
  check_float(input_embeds, "input_embeds");
  check_real(baseline_embeds, "baseline_embeds");
  check_real(alphas, "alphas");
  const int64_t L = input_embeds.size(0), d = input_embeds.size(1);
  TORCH_CHECK_VALUE(baseline_embeds.sizes() == input_embeds.sizes(), "baseline_embeds should have shape [", L, ", ",
                    d, "] (like input_embeds), got shape ", baseline_embeds.sizes());
  TORCH_CHECK_VALUE(alphas.dim() == 1, "alphas should have shape [m], got shape ", alphas.sizes());
  check_same_device(baseline_embeds, input_embeds, "baseline_embeds", "input_embeds");
  check_same_device(alphas, input_embeds, "alphas", "input_embeds");
  const at::ScalarType acc = acc_scalar_type(input_embeds.scalar_type());
  InterpolatePathPrepared r;
  r.input = inner_contiguous(input_embeds);
  r.baseline = inner_contiguous(
      baseline_embeds.scalar_type() == input_embeds.scalar_type() ? baseline_embeds : baseline_embeds.to(acc));
  r.alphas = alphas.to(acc).contiguous();
  if (fixed_mask.has_value()) {
    TORCH_CHECK_VALUE(fixed_mask->numel() == L, "fixed_mask should have shape [", L, "], got shape ",
                      fixed_mask->sizes());
    check_same_device(*fixed_mask, input_embeds, "fixed_mask", "input_embeds");
    r.fixed = fixed_mask->to(at::kBool).reshape({L}).contiguous();
  }
  const int64_t m = alphas.size(0);
  r.out = at::empty({m, L, d}, input_embeds.options());
  InterpolatePathParams& p = r.p;
  p.input = r.input.const_data_ptr();
  p.baseline = r.baseline.const_data_ptr();
  p.alphas = r.alphas.const_data_ptr();
  p.fixed = r.fixed.defined() ? r.fixed.const_data_ptr<bool>() : nullptr;
  p.out = r.out.mutable_data_ptr();
  p.m = m;
  p.L = L;
  p.d = d;
  p.input_stride_l = r.input.stride(0);
  p.baseline_stride_l = r.baseline.stride(0);
  p.dtype = dtype_of(input_embeds.scalar_type());
  p.baseline_dtype = dtype_of(r.baseline.scalar_type());
  return r;
}

}  // namespace aieg
