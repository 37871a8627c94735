// fplab._core.exp and log: float32 arrays elementwise through std::exp and std::log on float (the
// C library's expf and logf), exactly as the C++ layers call them (models/softmax_cross_entropy.cpp);
// and cuda_rsqrt, a GPU's rsqrtf (fp/cuda_rsqrt.hpp), which cuDNN's BatchNorm uses.
// PyTorch's own vectorised exp and log round about one result in ten differently (they are
// accurate to 1 ulp, not the same function), which is enough to change a softmax's bits; a
// PyTorch model that must match `fplab train` bit for bit takes these (fplab.torch.emulate(...,
// math="libm")).
#include <cmath>
#include <string>

#include "fp/cuda_rsqrt.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

template <float (*F)(float)>
py::array_t<float> apply(const FloatArray& x) {
  py::array_t<float> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  const float* in = x.data();
  float* o = out.mutable_data();
  const auto n = static_cast<size_t>(x.size());
  {
    py::gil_scoped_release unlocked;
    for (size_t i = 0; i < n; ++i) o[i] = F(in[i]);
  }
  return out;
}

float exp_f(float v) { return std::exp(v); }
float log_f(float v) { return std::log(v); }
float cuda_rsqrt_f(float v) { return fp::cuda_rsqrt(v); }

}  // namespace

void bind_elementwise(py::module_& m) {
  m.def("exp", &apply<exp_f>, py::arg("x"),
        "exp of every element of a float32 array as the C++ layers compute it (std::exp on float: the C library's "
        "expf), a float32 array of x's shape.");
  m.def("log", &apply<log_f>, py::arg("x"),
        "log of every element of a float32 array as the C++ layers compute it (std::log on float: logf).");
  m.def("cuda_rsqrt", &apply<cuda_rsqrt_f>, py::arg("x"),
        "rsqrtf of every element of a float32 array as an NVIDIA GPU computes it (measured on an H200: not "
        "correctly rounded; fp/cuda_rsqrt.hpp), a float32 array of x's shape.");
}

}  // namespace fplab::python
