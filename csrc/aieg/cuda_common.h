// Device helpers for the CUDA kernels: typed loads/stores, dtype dispatch, warp and block
// reductions. Torch-free: included only by csrc/cuda/*.cu, which nvcc compiles without any torch
// include path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "aieg/macros.h"
#include "aieg/math.h"

namespace aieg {

template <>
struct AccType<__half> {
  using type = float;
};
template <>
struct AccType<__nv_bfloat16> {
  using type = float;
};

namespace cuda {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

// Element i of p, converted to the accumulation type.
template <typename T>
__device__ __forceinline__ acc_t<T> load(const T* p, int64_t i) {
  return static_cast<acc_t<T>>(p[i]);
}
template <>
__device__ __forceinline__ float load<__half>(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
template <>
__device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}

// Round an accumulation-type value to T (round to nearest even, like torch's .to(dtype)).
template <typename T>
__device__ __forceinline__ T to_storage(acc_t<T> v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half to_storage<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 to_storage<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Calls f(T{}) with T the C++ type of dt.
template <typename F>
inline void dispatch_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::F64:
      f(double{});
      break;
    case DType::F16:
      f(__half{});
      break;
    case DType::BF16:
      f(__nv_bfloat16{});
      break;
    case DType::F32:
    default:
      f(float{});
      break;
  }
}

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MinOp {  // NaN-propagating, like torch.amin
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return nan_min(a, b);
  }
};
struct MaxOp {  // NaN-propagating, like torch.amax
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return nan_max(a, b);
  }
};
struct OrOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a | b; }
};

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces v over the block and returns the result to every thread. blockDim.x must be a multiple
// of 32 and every thread must call it. `smem` holds at least 32 values of T.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // smem may still be read from a previous call
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T r = smem[0];
    for (int i = 1; i < warps; ++i) r = op(r, smem[i]);
    smem[0] = r;
  }
  __syncthreads();
  return smem[0];
}

inline int64_t grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = ceil_div(n, threads);
  return blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

}  // namespace cuda
}  // namespace aieg
