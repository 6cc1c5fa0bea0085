// Torch-side helpers shared by the device-neutral argument preparation (<op>.cpp), the CPU kernels
// (cpu/*.cpp) and the CUDA bindings (cuda/*_cuda.cpp): dtype mapping, option parsing and argument
// checks. Never included by a .cu file.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/string_view.h>

#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "aieg/macros.h"

namespace aieg {

// A schema `str` argument (c10::string_view) as the std::string_view the prepare_<op> functions take.
inline std::string_view sv(c10::string_view s) { return std::string_view(s.data(), s.size()); }

// fp64 accumulates in fp64, every other float dtype in fp32 (reference._acc_dtype).
inline at::ScalarType acc_scalar_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

inline bool is_kernel_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

inline DType dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kDouble:
      return DType::F64;
    case at::kHalf:
      return DType::F16;
    case at::kBFloat16:
      return DType::BF16;
    default:
      return DType::F32;
  }
}

inline void check_float(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(is_kernel_float(t.scalar_type()), name,
                   " should be a float32, float64, float16 or bfloat16 tensor, got dtype ", t.scalar_type());
}

// Tensors that are cast to the accumulation dtype before use: any real (non-complex, non-bool) dtype.
inline void check_real(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(!at::isComplexType(t.scalar_type()) && t.scalar_type() != at::kBool, name,
                   " should be a real-valued tensor, got dtype ", t.scalar_type());
}

inline void check_same_device(const at::Tensor& t, const at::Tensor& ref, const char* name, const char* ref_name) {
  TORCH_CHECK(t.device() == ref.device(), name, " should be on the same device as ", ref_name, " (", ref.device(),
              "), got ", t.device());
}

// Parses a string option and raises ValueError in the reference's wording:
// "<name> must be one of ['a', 'b'], got 'c'".
template <typename E>
E parse_choice(const char* name, std::string_view value, std::initializer_list<std::pair<const char*, E>> choices) {
  for (const auto& c : choices)
    if (value == c.first) return c.second;
  std::ostringstream msg;
  msg << name << " must be one of [";
  bool first = true;
  for (const auto& c : choices) {
    msg << (first ? "" : ", ") << "'" << c.first << "'";
    first = false;
  }
  msg << "], got '" << value << "'";
  TORCH_CHECK_VALUE(false, msg.str());
}

// A view whose innermost dimension has stride 1 (a copy only when it does not).
inline at::Tensor inner_contiguous(const at::Tensor& t) {
  if (t.dim() == 0 || t.size(-1) <= 1 || t.stride(-1) == 1) return t;
  return t.contiguous();
}

}  // namespace aieg
