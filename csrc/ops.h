// Torch-side entry points of every op. The prepare_<op> functions (defined in <op>.cpp, the
// device-neutral part of each op) check the arguments, cast and lay out the inputs and allocate the
// output on the inputs' device; the CPU kernels (cpu/<op>_cpu.cpp) and the CUDA bindings
// (cuda/<op>_cuda.cpp) both start from them, so both backends accept exactly the same arguments.
// Never included by a .cu file.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <string_view>
#include <tuple>

#include "aieg/attention_gradient_product.h"
#include "aieg/emphasis_factors.h"
#include "aieg/hvp_l1_mean.h"
#include "aieg/integrate_gradients.h"
#include "aieg/interpolate_path.h"
#include "aieg/posnorm.h"

namespace aieg {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

// Each Prepared keeps the (possibly converted) tensors alive for as long as params points at them.
struct InterpolatePathPrepared {
  Tensor input, baseline, alphas, fixed, out;
  InterpolatePathParams p;
};
InterpolatePathPrepared prepare_interpolate_path(const Tensor& input_embeds, const Tensor& baseline_embeds,
                                                 const Tensor& alphas, const OptTensor& fixed_mask);

// adaptive_alphas runs on the host for every device (see aieg/adaptive_alphas.h; defined in
// adaptive_alphas.cpp); the result is placed on pilot_logits' device.
std::tuple<Tensor, Tensor> adaptive_alphas_host(const Tensor& pilot_logits, int64_t n_steps, std::string_view alloc,
                                                bool idg_compat_quirk);

struct EmphasisFactorsPrepared {
  Tensor logits, alphas, widths, slopes, out;
  EmphasisFactorsParams p;
};
EmphasisFactorsPrepared prepare_emphasis_factors(const Tensor& path_logits, const Tensor& alphas, const Tensor& widths,
                                                 std::string_view mode, std::string_view sign, std::string_view norm,
                                                 const OptTensor& slopes);

struct IntegrateGradientsPrepared {
  Tensor grads, weights, delta, out;
  IntegrateGradientsParams p;
};
IntegrateGradientsPrepared prepare_integrate_gradients(const Tensor& grads, const Tensor& weights, const Tensor& delta,
                                                       std::string_view reduce);

struct AttentionGradientProductPrepared {
  Tensor attn, grad, weights, out;
  AttentionGradientProductParams p;
};
AttentionGradientProductPrepared prepare_attention_gradient_product(const Tensor& attn, const OptTensor& grad,
                                                                    const OptTensor& weights, std::string_view reduce);

struct PosnormPrepared {
  Tensor scores, valid, out;
  PosnormParams p;
};
PosnormPrepared prepare_posnorm(const Tensor& scores, const OptTensor& valid_mask, std::string_view mode);

struct HvpL1MeanPrepared {
  Tensor hvps, out;
  HvpL1MeanParams p;
};
HvpL1MeanPrepared prepare_hvp_l1_mean(const Tensor& hvps);

}  // namespace aieg
