// adaptive_alphas: the host implementation used by both the CPU op (cpu/adaptive_alphas_cpu.cpp) and
// the CUDA op (cuda/adaptive_alphas_cuda.cpp): O(N + M) scalar fp64 work, see aieg/adaptive_alphas.h.
// Σ ŝ is taken with torch's own sum over a tensor laid out like the reference's, so the rounding,
// and with it the integer allocation, are bit-identical.
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linspace.h>

#include "aieg/adaptive_alphas.h"
#include "ops.h"
#include "torch_utils.h"

namespace aieg {

std::tuple<Tensor, Tensor> adaptive_alphas_host(const Tensor& pilot_logits, int64_t n_steps, std::string_view alloc,
                                                bool idg_compat_quirk) {
  const bool idg_minmax = parse_choice<bool>("alloc", alloc, {{"abs", false}, {"idg_minmax", true}});
  TORCH_CHECK_VALUE(n_steps >= 2, "n_steps must be >= 2, got ", n_steps);
  check_real(pilot_logits, "pilot_logits");
  const at::TensorOptions out_opts = pilot_logits.options().dtype(acc_scalar_type(pilot_logits.scalar_type()));
  const Tensor f = pilot_logits.detach().to(at::kCPU, at::kDouble).reshape({-1}).contiguous();
  const int64_t N = f.numel(), M = n_steps;
  const Tensor shat = at::empty({N}, f.options());
  if (adaptive_shat(f.const_data_ptr<double>(), N, idg_minmax, shat.mutable_data_ptr<double>())) {
    const double total = shat.sum().item<double>();
    const Tensor a = at::empty({M}, f.options()), w = at::empty({M}, f.options());
    if (adaptive_allocate(shat.const_data_ptr<double>(), total, N, M, idg_compat_quirk, a.mutable_data_ptr<double>(),
                          w.mutable_data_ptr<double>()))
      return {a.to(out_opts), w.to(out_opts)};
  }
  // The uniform grid, built exactly as reference.uniform_alphas builds it (on the target device).
  return {at::linspace(0.0, 1.0, M, out_opts), at::full({M}, 1.0 / static_cast<double>(M - 1), out_opts)};
}

}  // namespace aieg
