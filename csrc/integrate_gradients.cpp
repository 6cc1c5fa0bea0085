// integrate_gradients, device-neutral part: prepare_integrate_gradients checks the arguments, casts
// and lays out the inputs and allocates the output on the inputs' device. Shared by the CPU op
// (cpu/integrate_gradients_cpu.cpp) and the CUDA binding (cuda/integrate_gradients_cuda.cpp).
#include <ATen/ops/empty.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {

IntegrateGradientsPrepared prepare_integrate_gradients(const Tensor& grads, const Tensor& weights, const Tensor& delta,
                                                       std::string_view reduce) {
  const bool reduce_sum = parse_choice<bool>("reduce", reduce, {{"sum", true}, {"none", false}});
  TORCH_CHECK_VALUE(grads.dim() == 3, "grads should be a 3-D tensor [m, L, d], got shape ", grads.sizes());
  check_float(grads, "grads");
  check_real(weights, "weights");
  check_real(delta, "delta");
  const int64_t m = grads.size(0), L = grads.size(1), d = grads.size(2);
  TORCH_CHECK_VALUE(weights.dim() == 1 && weights.size(0) == m, "weights should have shape [", m,
                    "] (one weight per path step of grads), got shape ", weights.sizes());
  TORCH_CHECK_VALUE(delta.dim() == 2 && delta.size(0) == L && delta.size(1) == d, "delta should have shape [", L, ", ",
                    d, "] (the [L, d] of grads), got shape ", delta.sizes());
  check_same_device(weights, grads, "weights", "grads");
  check_same_device(delta, grads, "delta", "grads");

  const at::ScalarType acc = acc_scalar_type(grads.scalar_type());
  IntegrateGradientsPrepared r;
  r.grads = inner_contiguous(grads);
  r.weights = weights.to(acc).contiguous();
  // delta is read in grads' dtype when it has it, else cast to the accumulation dtype (as the
  // reference's delta.to(acc) does).
  r.delta = inner_contiguous(delta.scalar_type() == grads.scalar_type() ? delta : delta.to(acc));
  r.out = reduce_sum ? at::empty({L}, grads.options().dtype(acc)) : at::empty({L, d}, grads.options().dtype(acc));

  IntegrateGradientsParams& p = r.p;
  p.grads = r.grads.const_data_ptr();
  p.weights = r.weights.const_data_ptr();
  p.delta = r.delta.const_data_ptr();
  p.out = r.out.mutable_data_ptr();
  p.m = m;
  p.L = L;
  p.d = d;
  p.grads_stride_m = r.grads.stride(0);
  p.grads_stride_l = r.grads.stride(1);
  p.delta_stride_l = r.delta.stride(0);
  p.dtype = dtype_of(grads.scalar_type());
  p.delta_dtype = dtype_of(r.delta.scalar_type());
  p.reduce_sum = reduce_sum;
  return r;
}

}  // namespace aieg
