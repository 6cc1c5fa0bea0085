// interpolate_path on the CPU: the kernel. The arguments are checked and laid out by
// prepare_interpolate_path (interpolate_path.cpp, shared with the CUDA binding).
// Tiles of rows of E and E′ stay in cache while the m path points are written from them, so the
// inputs are read once and the [m, L, d] output is written once.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "aieg/math.h"
#include "cpu/vectorize.h"
#include "ops.h"

namespace aieg {
namespace {

// Rows of the tile in the accumulation dtype, converted once for all m path steps.
template <typename acc, typename T>
void to_acc_rows(acc* dst, const T* src, int64_t stride, int64_t rows, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    if constexpr (std::is_same_v<T, c10::Half>) {
      half_to_float(src + r * stride, dst + r * d, d);
    } else {
      for (int64_t j = 0; j < d; ++j) dst[r * d + j] = load_acc(src[r * stride + j]);
    }
  }
}

// One output row: o = b + α (e − b), rounded to the output dtype.
template <typename T, typename acc>
inline void interpolate_row_impl(T* AIEG_RESTRICT o, const acc* AIEG_RESTRICT e, const acc* AIEG_RESTRICT b, acc alpha,
                                 int64_t d) {
  for (int64_t j = 0; j < d; ++j) o[j] = store_acc<T>(interpolate_point(e[j], b[j], alpha));
}

#define AIEG_INTERPOLATE_ROW(T, ACC)                                                                   \
  AIEG_CPU_CLONES void interpolate_row(T* o, const ACC* e, const ACC* b, ACC alpha, int64_t d, ACC*) { \
    interpolate_row_impl(o, e, b, alpha, d);                                                           \
  }
AIEG_INTERPOLATE_ROW(float, float)
AIEG_INTERPOLATE_ROW(double, double)
AIEG_INTERPOLATE_ROW(c10::BFloat16, float)
#undef AIEG_INTERPOLATE_ROW

// float16 output: compute the row in float, then round it to half in one pass (F16C when present).
void interpolate_row(c10::Half* o, const float* e, const float* b, float alpha, int64_t d, float* scratch) {
  interpolate_row(scratch, e, b, alpha, d, nullptr);
  float_to_half(scratch, o, d);
}

template <typename scalar_t, typename base_t>
void interpolate_path_kernel(const InterpolatePathParams& p) {
  using acc = acc_t<scalar_t>;
  const auto* e = static_cast<const scalar_t*>(p.input);
  const auto* b = static_cast<const base_t*>(p.baseline);
  const auto* a = static_cast<const acc*>(p.alphas);
  auto* out = static_cast<scalar_t*>(p.out);
  const int64_t m = p.m, L = p.L, d = p.d;
  if (m == 0 || L == 0 || d == 0) return;
  const int64_t rows = std::max<int64_t>(1, 4096 / d);
  const int64_t ntiles = ceil_div(L, rows);
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / (m * rows * d));
  at::parallel_for(0, ntiles, grain, [&](int64_t t0, int64_t t1) {
    std::vector<acc> eb(rows * d), bb(rows * d), scratch(d);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * rows, r1 = std::min(L, r0 + rows);
      to_acc_rows(eb.data(), e + r0 * p.input_stride_l, p.input_stride_l, r1 - r0, d);
      to_acc_rows(bb.data(), b + r0 * p.baseline_stride_l, p.baseline_stride_l, r1 - r0, d);
      for (int64_t k = 0; k < m; ++k) {
        for (int64_t r = r0; r < r1; ++r) {
          scalar_t* o = out + (k * L + r) * d;
          if (p.fixed && p.fixed[r]) {
            const scalar_t* er = e + r * p.input_stride_l;
            std::copy(er, er + d, o);  // E itself, unrounded
          } else {
            interpolate_row(o, eb.data() + (r - r0) * d, bb.data() + (r - r0) * d, a[k], d, scratch.data());
          }
        }
      }
    }
  });
}

Tensor interpolate_path_cpu(const Tensor& input_embeds, const Tensor& baseline_embeds, const Tensor& alphas,
                            const OptTensor& fixed_mask) {
  auto r = prepare_interpolate_path(input_embeds, baseline_embeds, alphas, fixed_mask);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, r.input.scalar_type(), "interpolate_path_cpu", [&] {
    if (r.p.baseline_dtype == r.p.dtype)
      interpolate_path_kernel<scalar_t, scalar_t>(r.p);
    else
      interpolate_path_kernel<scalar_t, acc_t<scalar_t>>(r.p);
  });
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("interpolate_path", &interpolate_path_cpu); }

}  // namespace aieg
