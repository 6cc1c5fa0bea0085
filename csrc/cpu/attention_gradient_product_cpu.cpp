// attention_gradient_product on the CPU: the fused kernel
// out[q, k] = Σ_b w_b · f(Σ_h A[b, h, q, k], Σ_h ∂A[b, h, q, k]). The arguments are checked and laid
// out by prepare_attention_gradient_product (attention_gradient_product.cpp, shared with the CUDA
// binding).
//
// The [Q, K] plane is cut into tiles (whole rows when K is small, pieces of a row otherwise); a
// tile's head sums and its result stay in L1 while the B·H planes stream through it, so attn and
// grad are read exactly once, through their strides (attn[:, :, -1:] needs no copy).
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

// Head sums of one row piece: sa += Σ_h A_h, sg += Σ_h ∂A_h (ProductOfMeans), sg += Σ_h A_h·∂A_h
// (MeanOfProducts) or sa += Σ_h A_h (Attention); two heads per pass to halve the accumulator traffic.
template <typename acc, typename T, typename U>
inline void head_sums_impl(acc* AIEG_RESTRICT sa, acc* AIEG_RESTRICT sg, const T* a, const U* g, int64_t a_sh,
                           int64_t g_sh, int64_t H, int64_t n, AgpReduce red) {
  int64_t h = 0;
  for (; h + 2 <= H; h += 2) {
    const T* AIEG_RESTRICT a0 = a + h * a_sh;
    const T* AIEG_RESTRICT a1 = a0 + a_sh;
    if (red == AgpReduce::Attention) {
      for (int64_t j = 0; j < n; ++j) sa[j] += load_acc(a0[j]) + load_acc(a1[j]);
      continue;
    }
    const U* AIEG_RESTRICT g0 = g + h * g_sh;
    const U* AIEG_RESTRICT g1 = g0 + g_sh;
    if (red == AgpReduce::ProductOfMeans) {
      for (int64_t j = 0; j < n; ++j) {
        sa[j] += load_acc(a0[j]) + load_acc(a1[j]);
        sg[j] += load_acc(g0[j]) + load_acc(g1[j]);
      }
    } else {
      for (int64_t j = 0; j < n; ++j)
        sg[j] += load_acc(a0[j]) * load_acc(g0[j]) + load_acc(a1[j]) * load_acc(g1[j]);
    }
  }
  for (; h < H; ++h) {
    const T* AIEG_RESTRICT a0 = a + h * a_sh;
    const U* AIEG_RESTRICT g0 = red == AgpReduce::Attention ? nullptr : g + h * g_sh;
    if (red == AgpReduce::Attention) {
      for (int64_t j = 0; j < n; ++j) sa[j] += load_acc(a0[j]);
    } else if (red == AgpReduce::ProductOfMeans) {
      for (int64_t j = 0; j < n; ++j) {
        sa[j] += load_acc(a0[j]);
        sg[j] += load_acc(g0[j]);
      }
    } else {
      for (int64_t j = 0; j < n; ++j) sg[j] += load_acc(a0[j]) * load_acc(g0[j]);
    }
  }
}

// The hot loops per input dtypes, each compiled for several ISA levels (AIEG_CPU_CLONES).
#define AIEG_HEAD_SUMS(ACC, T, U)                                                                       \
  AIEG_CPU_CLONES void head_sums(ACC* sa, ACC* sg, const T* a, const U* g, int64_t a_sh, int64_t g_sh, \
                                 int64_t H, int64_t n, AgpReduce red) {                                 \
    head_sums_impl(sa, sg, a, g, a_sh, g_sh, H, n, red);                                                \
  }
AIEG_HEAD_SUMS(float, float, float)
AIEG_HEAD_SUMS(double, double, double)
AIEG_HEAD_SUMS(float, c10::BFloat16, c10::BFloat16)
AIEG_HEAD_SUMS(float, c10::BFloat16, float)
#undef AIEG_HEAD_SUMS

// float16 attention: convert blocks to float first (F16C when the CPU has it), one head at a time.
inline void to_float(const c10::Half* src, float* dst, int64_t n) { half_to_float(src, dst, n); }
inline void to_float(const float* src, float* dst, int64_t n) { std::copy(src, src + n, dst); }

template <typename U>
void head_sums(float* sa, float* sg, const c10::Half* a, const U* g, int64_t a_sh, int64_t g_sh, int64_t H, int64_t n,
               AgpReduce red) {
  constexpr int64_t kBlock = 1024;
  float ba[kBlock], bg[kBlock];
  for (int64_t o = 0; o < n; o += kBlock) {
    const int64_t len = std::min(kBlock, n - o);
    for (int64_t h = 0; h < H; ++h) {
      to_float(a + h * a_sh + o, ba, len);
      if (red != AgpReduce::Attention) to_float(g + h * g_sh + o, bg, len);
      head_sums(sa + o, sg + o, static_cast<const float*>(ba), static_cast<const float*>(bg), 0, 0, 1, len, red);
    }
  }
}

template <typename scalar_t, typename grad_t>
void attention_gradient_product_kernel(const AttentionGradientProductParams& p) {
  using acc = acc_t<scalar_t>;
  const auto* A = static_cast<const scalar_t*>(p.attn);
  const auto* G = static_cast<const grad_t*>(p.grad);
  const auto* w = static_cast<const acc*>(p.weights);
  auto* out = static_cast<acc*>(p.out);
  const int64_t B = p.B, H = p.H, Q = p.Q, K = p.K;
  if (Q == 0 || K == 0) return;
  // Tiles of at most kTile elements of the [Q, K] plane (3 fp32 buffers stay in L2).
  constexpr int64_t kTile = 4096;
  const int64_t cols = std::min(K, kTile);
  const int64_t col_chunks = ceil_div(K, cols);
  const int64_t rows = col_chunks == 1 ? std::max<int64_t>(1, kTile / K) : 1;
  const int64_t qk_tiles = ceil_div(Q, rows) * col_chunks;
  // A small plane (the last query row) gives few tiles: then B is also split into a fixed number
  // of chunks whose partial results are added in order afterwards. The split depends only on
  // the shapes, never on the thread count, so results are reproducible.
  const int64_t b_chunks = std::max<int64_t>(1, std::min<int64_t>(B, ceil_div(8, qk_tiles)));
  const int64_t b_per_chunk = ceil_div(std::max<int64_t>(B, 1), b_chunks);
  std::vector<acc> partial(b_chunks > 1 ? b_chunks * Q * K : 0);
  const int64_t ntiles = qk_tiles * b_chunks;
  const int64_t tile_work = std::max<int64_t>(1, (b_per_chunk * H + 1) * rows * cols);
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / tile_work);
  const acc Hf = static_cast<acc>(H);
  const AgpReduce red = p.reduce;
  const bool flat = col_chunks == 1 && (Q == 1 || (p.attn_stride[2] == K && (G == nullptr || p.grad_stride[2] == K)));

  at::parallel_for(0, ntiles, grain, [&](int64_t t0, int64_t t1) {
    std::vector<acc> buf(3 * rows * cols);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bc = t / qk_tiles, qt = t % qk_tiles;
      const int64_t b0 = bc * b_per_chunk, b1 = std::min(B, b0 + b_per_chunk);
      const int64_t r0 = (qt / col_chunks) * rows, r1 = std::min(Q, r0 + rows);
      const int64_t c0 = (qt % col_chunks) * cols, nc = std::min(K, c0 + cols) - c0;
      const int64_t n = (r1 - r0) * nc;
      acc* sa = buf.data();
      acc* sg = sa + rows * cols;
      acc* res = sg + rows * cols;
      std::fill(res, res + n, acc(0));
      for (int64_t b = b0; b < b1; ++b) {
        std::fill(sa, sa + n, acc(0));
        std::fill(sg, sg + n, acc(0));
        if (flat) {  // the tile's rows are one contiguous stretch of each head
          const scalar_t* a = A + b * p.attn_stride[0] + r0 * p.attn_stride[2];
          const grad_t* g = G ? G + b * p.grad_stride[0] + r0 * p.grad_stride[2] : nullptr;
          head_sums(sa, sg, a, g, p.attn_stride[1], p.grad_stride[1], H, n, red);
        } else {
          for (int64_t q = r0; q < r1; ++q) {
            const scalar_t* a = A + b * p.attn_stride[0] + q * p.attn_stride[2] + c0;
            const grad_t* g = G ? G + b * p.grad_stride[0] + q * p.grad_stride[2] + c0 : nullptr;
            head_sums(sa + (q - r0) * nc, sg + (q - r0) * nc, a, g, p.attn_stride[1], p.grad_stride[1], H, nc, red);
          }
        }
        const acc wb = w[b];
        for (int64_t j = 0; j < n; ++j) res[j] += wb * agp_per_batch(sa[j], sg[j], Hf, red);
      }
      acc* dst = b_chunks > 1 ? partial.data() + bc * Q * K : out;
      for (int64_t q = r0; q < r1; ++q) std::copy(res + (q - r0) * nc, res + (q - r0 + 1) * nc, dst + q * K + c0);
    }
  });
  if (b_chunks > 1) {
    std::copy(partial.begin(), partial.begin() + Q * K, out);
    for (int64_t c = 1; c < b_chunks; ++c)
      for (int64_t i = 0; i < Q * K; ++i) out[i] += partial[c * Q * K + i];
  }
}

Tensor attention_gradient_product_cpu(const Tensor& attn, const OptTensor& grad, const OptTensor& weights,
                                      c10::string_view reduce) {
  auto r = prepare_attention_gradient_product(attn, grad, weights, sv(reduce));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, r.attn.scalar_type(), "attention_gradient_product_cpu",
                                  [&] {
                                    if (r.p.grad_dtype == r.p.dtype)
                                      attention_gradient_product_kernel<scalar_t, scalar_t>(r.p);
                                    else
                                      attention_gradient_product_kernel<scalar_t, acc_t<scalar_t>>(r.p);
                                  });
  return r.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aieg_fast, CPU, m) { m.impl("attention_gradient_product", &attention_gradient_product_cpu); }

}  // namespace aieg
