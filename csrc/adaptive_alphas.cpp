// adaptive_alphas: the host implementation used by both the CPU op (cpu/adaptive_alphas_cpu.cpp) and
// the CUDA op (cuda/adaptive_alphas_cuda.cpp): O(N + M) scalar fp64 work, see aieg/adaptive_alphas.h.
// Σ ŝ is taken with torch's own sum over a tensor laid out like the reference's, so the rounding,
// and with it the integer allocation, are bit-identical. With idg_compat_quirk the leftover keys are
// sorted with torch's own (not stable) sort, as the reference and the official IDG code do, so
// ties are ordered identically too.
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/sort.h>

#include <vector>

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
    const Tensor mp = at::empty({N}, f.options());
    std::vector<int64_t> n(N);
    const int64_t R = adaptive_floor_counts(shat.const_data_ptr<double>(), total, N, M, mp.mutable_data_ptr<double>(),
                                            n.data());
    if (R >= 0) {
      if (idg_compat_quirk) {
        const Tensor key = mp.clone();
        double* kp = key.mutable_data_ptr<double>();
        for (int64_t j = 0; j < N; ++j)
          if (n[j] != 0) kp[j] = -1.0;
        const Tensor order = std::get<1>(at::sort(key)).flip({0}).contiguous();
        adaptive_official_leftovers(order.const_data_ptr<int64_t>(), R, n.data());
      } else {
        adaptive_intended_leftovers(mp.const_data_ptr<double>(), N, R, n.data());
      }
      const Tensor a = at::empty({M}, f.options()), w = at::empty({M}, f.options());
      adaptive_place(n.data(), N, M, idg_compat_quirk, a.mutable_data_ptr<double>(), w.mutable_data_ptr<double>());
      return {a.to(out_opts), w.to(out_opts)};
    }
  }
  // The uniform grid, built exactly as reference.uniform_alphas builds it (on the target device).
  return {at::linspace(0.0, 1.0, M, out_opts), at::full({M}, 1.0 / static_cast<double>(M - 1), out_opts)};
}

}  // namespace aieg
