// adaptive_alphas for CPU tensors: the op is adaptive_alphas_host (adaptive_alphas.cpp, shared with
// the CUDA op), which runs on the host for every device; this file only registers it for CPU.
#include <torch/library.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

std::tuple<Tensor, Tensor> adaptive_alphas_cpu(const Tensor& pilot_logits, int64_t n_steps, c10::string_view alloc,
                                               bool idg_compat_quirk) {
  return adaptive_alphas_host(pilot_logits, n_steps, sv(alloc), idg_compat_quirk);
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("adaptive_alphas", &adaptive_alphas_cpu); }

}  // namespace aieg
