// hvp_l1_mean, device-neutral part: prepare_hvp_l1_mean checks the arguments, lays out the input
// (innermost dimension contiguous) and allocates the output on the input's device. Shared by the
// CPU op (cpu/hvp_l1_mean_cpu.cpp) and the CUDA binding (cuda/hvp_l1_mean_cuda.cpp).
#include <ATen/ops/empty.h>

#include "ops.h"
#include "torch_utils.h"

namespace aieg {

HvpL1MeanPrepared prepare_hvp_l1_mean(const Tensor& hvps) {
  TORCH_CHECK_VALUE(hvps.dim() == 3, "hvps should have shape [m, n, d], got shape ", hvps.sizes());
  check_float(hvps, "hvps");
  TORCH_CHECK_VALUE(hvps.size(0) >= 1, "hvps should hold at least one probe (m >= 1), got shape ", hvps.sizes());
  HvpL1MeanPrepared r;
  r.hvps = inner_contiguous(hvps);
  r.out = at::empty({hvps.size(1)}, hvps.options().dtype(acc_scalar_type(hvps.scalar_type())));
  HvpL1MeanParams& p = r.p;
  p.hvps = r.hvps.const_data_ptr();
  p.out = r.out.mutable_data_ptr();
  p.m = hvps.size(0);
  p.n = hvps.size(1);
  p.d = hvps.size(2);
  p.stride_m = r.hvps.stride(0);
  p.stride_n = r.hvps.stride(1);
  p.dtype = dtype_of(hvps.scalar_type());
  return r;
}

}  // namespace aieg
