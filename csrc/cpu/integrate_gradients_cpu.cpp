// integrate_gradients on the CPU: the fused kernel  out = Δ ⊙ Σ_m w_m G_m  (reduced over d), which
// reads grads exactly once. The arguments are checked and laid out by prepare_integrate_gradients
// (integrate_gradients.cpp, shared with the CUDA binding).
//
// Tiling: the [L, d] plane is cut into tiles of ~kTileElems elements (whole rows when d is small,
// pieces of one row when d is large). A tile's accumulator stays in L1 while the m path steps
// stream through it, each step reading one contiguous stretch of grads; tiles run in parallel on
// ATen's OpenMP pool and every output element is owned by one tile, so the result does not depend
// on the thread count.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "aieg/math.h"
#include "cpu/vectorize.h"
#include "ops.h"
#include "torch_utils.h"

namespace aieg {
namespace {

constexpr int64_t kTileElems = 8192;  // 32 KiB of fp32 accumulators

// y += a * x over n contiguous elements.
template <typename acc, typename T>
inline void axpy_impl(acc* AIEG_RESTRICT y, const T* AIEG_RESTRICT x, acc a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * load_acc(x[i]);
}

// y += Σ_k a_k x_k for four path steps at once: a quarter of the accumulator loads and stores.
template <typename acc, typename T>
inline void axpy4_impl(acc* AIEG_RESTRICT y, const T* AIEG_RESTRICT x0, const T* AIEG_RESTRICT x1,
                       const T* AIEG_RESTRICT x2, const T* AIEG_RESTRICT x3, const acc* a, int64_t n) {
  const acc a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
  for (int64_t i = 0; i < n; ++i)
    y[i] += (a0 * load_acc(x0[i]) + a1 * load_acc(x1[i])) + (a2 * load_acc(x2[i]) + a3 * load_acc(x3[i]));
}

// The hot loops per input dtype, each compiled for several ISA levels (AIEG_CPU_CLONES).
#define AIEG_AXPY(ACC, T)                                                                            \
  AIEG_CPU_CLONES void axpy(ACC* y, const T* x, ACC a, int64_t n) { axpy_impl(y, x, a, n); }        \
  AIEG_CPU_CLONES void axpy4(ACC* y, const T* x0, const T* x1, const T* x2, const T* x3, const ACC* a, \
                             int64_t n) {                                                            \
    axpy4_impl(y, x0, x1, x2, x3, a, n);                                                             \
  }
AIEG_AXPY(float, float)
AIEG_AXPY(double, double)
AIEG_AXPY(float, c10::BFloat16)
#undef AIEG_AXPY

// float16 grads: convert blocks to float first (F16C when the CPU has it), then the float loops.
constexpr int64_t kHalfBlock = 1024;

void axpy(float* y, const c10::Half* x, float a, int64_t n) {
  float buf[kHalfBlock];
  for (int64_t o = 0; o < n; o += kHalfBlock) {
    const int64_t len = std::min(kHalfBlock, n - o);
    half_to_float(x + o, buf, len);
    axpy(y + o, static_cast<const float*>(buf), a, len);
  }
}

void axpy4(float* y, const c10::Half* x0, const c10::Half* x1, const c10::Half* x2, const c10::Half* x3,
           const float* a, int64_t n) {
  float buf[4][kHalfBlock];
  for (int64_t o = 0; o < n; o += kHalfBlock) {
    const int64_t len = std::min(kHalfBlock, n - o);
    half_to_float(x0 + o, buf[0], len);
    half_to_float(x1 + o, buf[1], len);
    half_to_float(x2 + o, buf[2], len);
    half_to_float(x3 + o, buf[3], len);
    axpy4(y + o, static_cast<const float*>(buf[0]), static_cast<const float*>(buf[1]),
          static_cast<const float*>(buf[2]), static_cast<const float*>(buf[3]), a, len);
  }
}

// Σ_j (Δ_j · s_j): each product is rounded in the accumulation dtype (like the reference's
// `delta * s`), the sum is taken in fp64 over 8 independent lanes.
template <typename acc, typename D>
inline double delta_dot(const D* AIEG_RESTRICT dl, const acc* AIEG_RESTRICT s, int64_t n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lanes[k] += static_cast<double>(load_acc(dl[i + k]) * s[i + k]);
  double total = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (; i < n; ++i) total += static_cast<double>(load_acc(dl[i]) * s[i]);
  return total;
}

template <typename scalar_t, typename delta_t>
void integrate_gradients_kernel(const IntegrateGradientsParams& p) {
  using acc = acc_t<scalar_t>;
  const auto* g = static_cast<const scalar_t*>(p.grads);
  const auto* w = static_cast<const acc*>(p.weights);
  const auto* dl = static_cast<const delta_t*>(p.delta);
  auto* out = static_cast<acc*>(p.out);
  const int64_t m = p.m, L = p.L, d = p.d;
  if (L == 0) return;
  if (d == 0) {
    if (p.reduce_sum) std::fill(out, out + L, acc(0));
    return;
  }
  const int64_t cols = std::min(d, kTileElems);
  const int64_t col_chunks = ceil_div(d, cols);
  const int64_t rows = col_chunks == 1 ? std::max<int64_t>(1, kTileElems / d) : 1;
  const int64_t ntiles = ceil_div(L, rows) * col_chunks;
  // Row sums of tiles that hold a piece of a row; added in a fixed order afterwards.
  std::vector<double> partial(p.reduce_sum && col_chunks > 1 ? L * col_chunks : 0);
  const int64_t tile_work = (m + 1) * rows * cols;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / tile_work);

  at::parallel_for(0, ntiles, grain, [&](int64_t t0, int64_t t1) {
    std::vector<acc> buf(rows * cols);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = (t / col_chunks) * rows, r1 = std::min(L, r0 + rows);
      const int64_t chunk = t % col_chunks;
      const int64_t c0 = chunk * cols, nc = std::min(d, c0 + cols) - c0;
      acc* s = buf.data();
      std::fill(s, s + (r1 - r0) * nc, acc(0));
      // Rows of a tile are one contiguous stretch when grads' rows are packed.
      const bool flat = p.grads_stride_l == nc;
      const int64_t nrows = flat ? 1 : r1 - r0, len = flat ? (r1 - r0) * nc : nc;
      const int64_t sm = p.grads_stride_m;
      int64_t k = 0;
      for (; k + 4 <= m; k += 4) {
        for (int64_t i = 0; i < nrows; ++i) {
          const scalar_t* gr = g + k * sm + (r0 + i) * p.grads_stride_l + c0;
          axpy4(s + i * len, gr, gr + sm, gr + 2 * sm, gr + 3 * sm, w + k, len);
        }
      }
      for (; k < m; ++k)
        for (int64_t i = 0; i < nrows; ++i) axpy(s + i * len, g + k * sm + (r0 + i) * p.grads_stride_l + c0, w[k], len);
      for (int64_t r = r0; r < r1; ++r) {
        const delta_t* drow = dl + r * p.delta_stride_l + c0;
        const acc* srow = s + (r - r0) * nc;
        if (p.reduce_sum) {
          const double v = delta_dot(drow, srow, nc);
          if (col_chunks == 1)
            out[r] = static_cast<acc>(v);
          else
            partial[r * col_chunks + chunk] = v;
        } else {
          acc* orow = out + r * d + c0;
          for (int64_t j = 0; j < nc; ++j) orow[j] = load_acc(drow[j]) * srow[j];
        }
      }
    }
  });
  if (p.reduce_sum && col_chunks > 1) {
    for (int64_t r = 0; r < L; ++r) {
      double v = 0;
      for (int64_t c = 0; c < col_chunks; ++c) v += partial[r * col_chunks + c];
      out[r] = static_cast<acc>(v);
    }
  }
}

Tensor integrate_gradients_cpu(const Tensor& grads, const Tensor& weights, const Tensor& delta,
                               c10::string_view reduce) {
  auto r = prepare_integrate_gradients(grads, weights, delta, sv(reduce));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, r.grads.scalar_type(), "integrate_gradients_cpu", [&] {
    if (r.p.delta_dtype == r.p.dtype)
      integrate_gradients_kernel<scalar_t, scalar_t>(r.p);
    else
      integrate_gradients_kernel<scalar_t, acc_t<scalar_t>>(r.p);
  });
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("integrate_gradients", &integrate_gradients_cpu); }

}  // namespace aieg
