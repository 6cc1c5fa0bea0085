// The aieg_fast operator schemas (one TORCH_LIBRARY block) and the pybind11 module `_C`, which only
// reports how the extension was built. Tensors always go through the dispatcher:
// torch.ops.aieg_fast.<op>; the kernels register themselves in cpu/*_cpu.cpp and cuda/*_cuda.cpp,
// both of which start from the device-neutral argument checks in <op>.cpp.
#include <ATen/core/dispatch/Dispatcher.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/library.h>

#include <string>
#include <vector>

#define AIEG_STR_(...) #__VA_ARGS__
#define AIEG_STR(...) AIEG_STR_(__VA_ARGS__)

#ifndef AIEG_FAST_VERSION
#define AIEG_FAST_VERSION unknown
#endif
#ifndef AIEG_TORCH_VERSION
#define AIEG_TORCH_VERSION unknown
#endif
#ifndef AIEG_CUDA_ARCHS
#define AIEG_CUDA_ARCHS
#endif

namespace {

// Schema order is the order of reference.py.
const char* const kOps[] = {"interpolate_path", "adaptive_alphas", "emphasis_factors",
                            "integrate_gradients", "attention_gradient_product", "posnorm", "hvp_l1_mean"};

TORCH_LIBRARY(aieg_fast, m) {
  m.def(
      "interpolate_path(Tensor input_embeds, Tensor baseline_embeds, Tensor alphas, Tensor? fixed_mask=None) "
      "-> Tensor");
  m.def(
      "adaptive_alphas(Tensor pilot_logits, int n_steps, str alloc=\"abs\", bool idg_compat_quirk=False) "
      "-> (Tensor, Tensor)");
  m.def(
      "emphasis_factors(Tensor path_logits, Tensor alphas, Tensor widths, str mode=\"fd\", str sign=\"abs\", "
      "str norm=\"l1\", Tensor? slopes=None) -> Tensor");
  m.def("integrate_gradients(Tensor grads, Tensor weights, Tensor delta, str reduce=\"sum\") -> Tensor");
  m.def(
      "attention_gradient_product(Tensor attn, Tensor? grad=None, Tensor? weights=None, "
      "str reduce=\"product_of_means\") -> Tensor");
  m.def("posnorm(Tensor scores, Tensor? valid_mask=None, str mode=\"minmax\") -> Tensor");
  m.def("hvp_l1_mean(Tensor hvps) -> Tensor");
}

// Ops of this library that have a kernel for `key` (read from the dispatcher, so the list is
// always what was really compiled and registered).
std::vector<std::string> ops_with_kernel(c10::DispatchKey key) {
  std::vector<std::string> names;
  for (const char* op : kOps) {
    auto handle = c10::Dispatcher::singleton().findSchema({std::string("aieg_fast::") + op, ""});
    if (handle.has_value() && handle->hasKernelForDispatchKey(key)) names.emplace_back(op);
  }
  return names;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "aieg_fast compiled kernels; the ops are torch.ops.aieg_fast.*, this module reports the build.";
  m.attr("__version__") = AIEG_STR(AIEG_FAST_VERSION);
  m.attr("torch_version") = AIEG_STR(AIEG_TORCH_VERSION);
#ifdef AIEG_WITH_CUDA
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
  m.attr("cuda_arch_list") = AIEG_STR(AIEG_CUDA_ARCHS);
#if defined(__clang__)
  m.attr("compiler") = "clang " __clang_version__;
#elif defined(__GNUC__)
  m.attr("compiler") = "gcc " __VERSION__;
#else
  m.attr("compiler") = "unknown";
#endif
#ifdef _OPENMP
  m.attr("openmp") = true;
#else
  m.attr("openmp") = false;
#endif
  m.attr("ops") = ops_with_kernel(c10::DispatchKey::CPU);
  m.attr("cuda_ops") = ops_with_kernel(c10::DispatchKey::CUDA);
}
