// Small scalar helpers shared by the CPU and CUDA kernels (torch-free; compiled by g++ and nvcc).
#pragma once

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cmath>
#include <limits>
#endif

#include "aieg/macros.h"

namespace aieg {

// Accumulation type: double stays double, every other float type accumulates in float.
template <typename T>
struct AccType {
  using type = float;
};
template <>
struct AccType<double> {
  using type = double;
};
template <typename T>
using acc_t = typename AccType<T>::type;

template <typename T>
AIEG_HOST_DEVICE inline bool is_finite(T x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

template <typename T>
AIEG_HOST_DEVICE inline T quiet_nan();
template <>
AIEG_HOST_DEVICE inline float quiet_nan<float>() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0x7fc00000);
#else
  return std::numeric_limits<float>::quiet_NaN();
#endif
}
template <>
AIEG_HOST_DEVICE inline double quiet_nan<double>() {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(0x7ff8000000000000LL);
#else
  return std::numeric_limits<double>::quiet_NaN();
#endif
}

template <typename T>
AIEG_HOST_DEVICE inline T pos_inf();
template <>
AIEG_HOST_DEVICE inline float pos_inf<float>() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0x7f800000);
#else
  return std::numeric_limits<float>::infinity();
#endif
}
template <>
AIEG_HOST_DEVICE inline double pos_inf<double>() {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(0x7ff0000000000000LL);
#else
  return std::numeric_limits<double>::infinity();
#endif
}

// |x| that keeps NaN as NaN (like torch.abs).
template <typename T>
AIEG_HOST_DEVICE inline T abs_val(T x) {
  return x < T(0) ? -x : x;
}

// max(x, 0) that keeps NaN as NaN (like torch.clamp_min(x, 0)).
template <typename T>
AIEG_HOST_DEVICE inline T relu_val(T x) {
  return x < T(0) ? T(0) : x;
}

// min/max that propagate NaN (like torch.amin/amax).
template <typename T>
AIEG_HOST_DEVICE inline T nan_min(T a, T b) {
  return (a != a || a < b) ? a : b;
}
template <typename T>
AIEG_HOST_DEVICE inline T nan_max(T a, T b) {
  return (a != a || a > b) ? a : b;
}

}  // namespace aieg
