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

// Step 2: floor counts n_j = ⌊M·π_j⌋ (n_0 = 0) and mp_j = M·π_j, given total = Σ ŝ. Returns the
// number R = M − Σ n_j of leftover samples, or -1 when the uniform grid applies: total is not > 0,
// or (a case the reference cannot finish: slopes that overflow to inf) some M·π_j is not finite.
inline int64_t adaptive_floor_counts(const double* shat, double total, int64_t N, int64_t M, double* mp, int64_t* n) {
  if (!(total > 0)) return -1;
  int64_t assigned = 0;
  for (int64_t j = 0; j < N; ++j) {
    mp[j] = static_cast<double>(M) * (shat[j] / total);
    if (!std::isfinite(mp[j])) return -1;
    n[j] = j == 0 ? 0 : static_cast<int64_t>(std::floor(mp[j]));
    assigned += n[j];
  }
  return M - assigned;
}

// Step 3 (intended allocation): the R leftovers go one each to the empty bins j >= 1, largest
// M·π first (ties to the lower index); the rest by largest fractional part (ties to the lower
// index), then round-robin.
inline void adaptive_intended_leftovers(const double* mp, int64_t N, int64_t R, int64_t* n) {
  if (R <= 0) return;
  std::vector<int64_t> empty;
  for (int64_t j = 1; j < N; ++j)
    if (n[j] == 0) empty.push_back(j);
  std::stable_sort(empty.begin(), empty.end(), [&](int64_t a, int64_t b) { return mp[a] > mp[b]; });
  const int64_t take = std::min<int64_t>(R, static_cast<int64_t>(empty.size()));
  for (int64_t k = 0; k < take; ++k) n[empty[k]] = 1;
  R -= take;
  if (R > 0) {
    std::vector<double> frac(N);
    for (int64_t j = 0; j < N; ++j) frac[j] = mp[j] - std::floor(mp[j]);
    std::vector<int64_t> order(N - 1);
    std::iota(order.begin(), order.end(), int64_t(1));
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return frac[a] > frac[b]; });
    for (int64_t k = 0; R > 0; ++k, --R) n[order[k % (N - 1)]] += 1;
  }
}

// Step 3 (official IDG code, idg_compat_quirk): the key of bin j is mp_j where n_j = 0 (bin 0
// included) and -1 elsewhere. The caller sorts the keys ascending with torch's own sort (not
// stable, as the official code does) and passes the order reversed; the first R bins are set
// to 1 (set, not incremented: bins with samples can be reset to 1 when R is large).
inline void adaptive_official_leftovers(const int64_t* order_desc, int64_t R, int64_t* n) {
  for (int64_t k = 0; k < R; ++k) n[order_desc[k]] = 1;
}

// Step 4: placement of the counts n [N]. Intended: bin j >= 1 gets n_j left-endpoint samples
// α̃_{j−1} + k·h/n_j of width h/n_j. quirk (official): bins are visited from 0 and the start offset
// advances by h only on non-empty bins; samples left unplaced (Σ n_j < M) get α = 0, width 0.
// Fills M alphas and widths sorted by alpha (stable).
inline void adaptive_place(const int64_t* n, int64_t N, int64_t M, bool quirk, double* alphas, double* widths) {
  const double h = 1.0 / static_cast<double>(N - 1);
  std::vector<double> a, w;
  a.reserve(M);
  w.reserve(M);
  int64_t placed = 0;  // non-empty bins so far: the official start offset is placed·h
  for (int64_t j = quirk ? 0 : 1; j < N; ++j) {
    const int64_t nj = n[j];
    if (nj == 0) continue;
    const double left = quirk ? static_cast<double>(placed) * h : static_cast<double>(j - 1) * h;
    placed += 1;
    for (int64_t k = 0; k < nj; ++k) {
      a.push_back(left + static_cast<double>(k) * h / static_cast<double>(nj));
      w.push_back(h / static_cast<double>(nj));
    }
  }
  while (static_cast<int64_t>(a.size()) < M) {  // official quirk only: unplaced samples
    a.push_back(0.0);
    w.push_back(0.0);
  }
  std::vector<int64_t> idx(M);
  std::iota(idx.begin(), idx.end(), int64_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) { return a[x] < a[y]; });
  for (int64_t k = 0; k < M; ++k) {
    alphas[k] = a[idx[k]];
    widths[k] = w[idx[k]];
  }
}

}  // namespace aieg
