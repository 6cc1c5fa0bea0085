// attention_gradient_product, device-neutral part: prepare_attention_gradient_product checks the
// arguments, casts and lays out the inputs (attn and grad are read through their strides) and
// allocates the [Q, K] output on the inputs' device. Shared by the CPU op
// (cpu/attention_gradient_product_cpu.cpp) and the CUDA binding (cuda/attention_gradient_product_cuda.cpp).
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {

AttentionGradientProductPrepared prepare_attention_gradient_product(const Tensor& attn, const OptTensor& grad,
                                                                    const OptTensor& weights,
                                                                    std::string_view reduce) {
  const AgpReduce red = parse_choice<AgpReduce>("reduce", reduce,
                                                {{"product_of_means", AgpReduce::ProductOfMeans},
                                                 {"mean_of_products", AgpReduce::MeanOfProducts},
                                                 {"attention", AgpReduce::Attention}});
  TORCH_CHECK_VALUE(attn.dim() == 4, "attn should have shape [B, H, Q, K], got shape ", attn.sizes());
  check_float(attn, "attn");
  const int64_t B = attn.size(0);
  const at::ScalarType acc = acc_scalar_type(attn.scalar_type());
  AttentionGradientProductPrepared r;
  r.attn = inner_contiguous(attn);
  if (red != AgpReduce::Attention) {
    TORCH_CHECK_VALUE(grad.has_value(), "grad is required for reduce='", reduce, "', got None");
    check_real(*grad, "grad");
    TORCH_CHECK_VALUE(grad->sizes() == attn.sizes(), "grad should have shape ", attn.sizes(),
                      " (like attn), got shape ", grad->sizes());
    check_same_device(*grad, attn, "grad", "attn");
    r.grad = inner_contiguous(grad->scalar_type() == attn.scalar_type() ? *grad : grad->to(acc));
  }
  if (weights.has_value()) {
    check_real(*weights, "weights");
    TORCH_CHECK_VALUE(weights->dim() == 1 && weights->size(0) == B, "weights should have shape [", B,
                      "] (B of attn), got shape ", weights->sizes());
    check_same_device(*weights, attn, "weights", "attn");
    r.weights = weights->to(acc).contiguous();
  } else {
    r.weights = at::ones({B}, attn.options().dtype(acc));
  }
  r.out = at::empty({attn.size(2), attn.size(3)}, attn.options().dtype(acc));
  AttentionGradientProductParams& p = r.p;
  p.attn = r.attn.const_data_ptr();
  p.grad = r.grad.defined() ? r.grad.const_data_ptr() : nullptr;
  p.weights = r.weights.const_data_ptr();
  p.out = r.out.mutable_data_ptr();
  p.B = B;
  p.H = attn.size(1);
  p.Q = attn.size(2);
  p.K = attn.size(3);
  for (int i = 0; i < 3; ++i) {
    p.attn_stride[i] = r.attn.stride(i);
    p.grad_stride[i] = r.grad.defined() ? r.grad.stride(i) : 0;
  }
  p.dtype = dtype_of(attn.scalar_type());
  p.grad_dtype = r.grad.defined() ? dtype_of(r.grad.scalar_type()) : p.dtype;
  p.reduce = red;
  return r;
}

}  // namespace aieg
