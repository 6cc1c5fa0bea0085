// adaptive_alphas: the IDG sample allocation (spec §3.2, §6.4), host-only scalar code.
// Torch-free. The work is O(N + M) scalar fp64 arithmetic, so both the CPU op and the CUDA op run
// it on the host (the CUDA op copies the N pilot logits to the host first, as the reference does).
// The caller computes total = Σ ŝ with torch's own sum so that its rounding is bit-identical to
// the reference, which makes the integer allocation identical too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace aieg {

// Step 1: slopes s̃ and allocation weights ŝ (ŝ_0 = 0). Returns false when the uniform grid
// applies (N < 2, a non-finite pilot logit, or constant slopes for idg_minmax).
inline bool adaptive_shat(const double* f, int64_t N, bool idg_minmax, double* shat) {
  if (N < 2) return false;
  for (int64_t j = 0; j < N; ++j) {
    if (!std::isfinite(f[j])) return false;
  }
  std::vector<double> s(N, 0.0);
  for (int64_t j = 1; j < N; ++j) s[j] = (f[j] - f[j - 1]) * static_cast<double>(N - 1);
  if (!idg_minmax) {
    for (int64_t j = 0; j < N; ++j) shat[j] = std::fabs(s[j]);
  } else {
    const double lo = *std::min_element(s.begin(), s.end());
    const double hi = *std::max_element(s.begin(), s.end());
    if (!(hi > lo)) return false;
    for (int64_t j = 0; j < N; ++j) shat[j] = (s[j] - lo) / (hi - lo);
  }
  shat[0] = 0.0;
  return true;
}

// Step 2: integer allocation and placement, given total = Σ ŝ. Fills M alphas and widths
// (sorted by alpha, stable). Returns false when the uniform grid applies: total is not > 0, or
// (a case the reference cannot finish: slopes that overflow to inf) some M·π_j is not finite.
inline bool adaptive_allocate(const double* shat, double total, int64_t N, int64_t M, bool quirk, double* alphas,
                              double* widths) {
  if (!(total > 0)) return false;
  std::vector<double> mp(N);
  std::vector<int64_t> n(N);
  int64_t assigned = 0;
  for (int64_t j = 0; j < N; ++j) {
    mp[j] = static_cast<double>(M) * (shat[j] / total);
    if (!std::isfinite(mp[j])) return false;
    n[j] = j == 0 ? 0 : static_cast<int64_t>(std::floor(mp[j]));
    assigned += n[j];
  }
  int64_t R = M - assigned;
  if (R > 0) {
    // Empty bins j >= 1, largest M·π first, ties to the lower index.
    std::vector<int64_t> empty;
    for (int64_t j = 1; j < N; ++j)
      if (n[j] == 0) empty.push_back(j);
    std::stable_sort(empty.begin(), empty.end(), [&](int64_t a, int64_t b) { return mp[a] > mp[b]; });
    const int64_t take = std::min<int64_t>(R, static_cast<int64_t>(empty.size()));
    for (int64_t k = 0; k < take; ++k) n[empty[k]] = 1;
    R -= take;
    if (R > 0) {
      // Largest fractional part first (ties to the lower index), then round-robin.
      std::vector<double> frac(N);
      for (int64_t j = 0; j < N; ++j) frac[j] = mp[j] - std::floor(mp[j]);
      std::vector<int64_t> order(N - 1);
      std::iota(order.begin(), order.end(), int64_t(1));
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return frac[a] > frac[b]; });
      for (int64_t k = 0; R > 0; ++k, --R) n[order[k % (N - 1)]] += 1;
    }
  }
  const double h = 1.0 / static_cast<double>(N - 1);
  std::vector<double> a, w;
  a.reserve(M);
  w.reserve(M);
  int64_t start_bin = 1;  // quirk: the offset only advances on non-empty bins
  for (int64_t j = 1; j < N; ++j) {
    const int64_t nj = n[j];
    if (nj == 0) continue;
    const double left = quirk ? static_cast<double>(start_bin - 1) * h : static_cast<double>(j - 1) * h;
    start_bin += 1;
    for (int64_t k = 0; k < nj; ++k) {
      a.push_back(left + static_cast<double>(k) * h / static_cast<double>(nj));
      w.push_back(h / static_cast<double>(nj));
    }
  }
  if (static_cast<int64_t>(a.size()) != M) return false;  // unreachable: Σ n_j = M
  std::vector<int64_t> idx(M);
  std::iota(idx.begin(), idx.end(), int64_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) { return a[x] < a[y]; });
  for (int64_t k = 0; k < M; ++k) {
    alphas[k] = a[idx[k]];
    widths[k] = w[idx[k]];
  }
  return true;
}

}  // namespace aieg
