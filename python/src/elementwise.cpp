// fplab._core.exp and log: float32 arrays elementwise through std::exp and std::log on float (the
// C library's expf and logf), exactly as the C++ layers call them (models/softmax_cross_entropy.cpp);
// and cuda_rsqrt, a GPU's rsqrtf (fp/cuda_rsqrt.hpp), which cuDNN's BatchNorm uses; and
// channel_fma, its fused multiply-adds with one factor per channel (models/batch_norm.cpp's cuDNN
// form), one rounding each as std::fma gives it (PyTorch has no elementwise fma).
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

// fma(x[b, c, p], scale[c], addend) for x (B, C, P) float32, the addend per channel (C,) or per
// element (B, C, P).
py::array_t<float> channel_fma(const FloatArray& x, const FloatArray& scale, const FloatArray& addend) {
  if (x.ndim() != 3) throw std::invalid_argument("channel_fma: x must be a 3-D float32 array (batch, channels, positions)");
  const auto batch = static_cast<size_t>(x.shape(0)), channels = static_cast<size_t>(x.shape(1));
  const auto positions = static_cast<size_t>(x.shape(2));
  if (scale.ndim() != 1 || static_cast<size_t>(scale.shape(0)) != channels)
    throw std::invalid_argument("channel_fma: scale must hold one value per channel (" + std::to_string(channels) + ")");
  const bool per_channel = addend.ndim() == 1 && static_cast<size_t>(addend.shape(0)) == channels;
  const bool per_element = addend.ndim() == 3 && addend.shape(0) == x.shape(0) && addend.shape(1) == x.shape(1) &&
                           addend.shape(2) == x.shape(2);
  if (!per_channel && !per_element)
    throw std::invalid_argument("channel_fma: addend must hold one value per channel or x's shape");
  py::array_t<float> out(std::vector<py::ssize_t>(x.shape(), x.shape() + 3));
  const float *xs = x.data(), *ss = scale.data(), *as = addend.data();
  float* o = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    for (size_t b = 0; b < batch; ++b)
      for (size_t c = 0; c < channels; ++c) {
        const size_t at = (b * channels + c) * positions;
        for (size_t p = 0; p < positions; ++p)
          o[at + p] = std::fma(xs[at + p], ss[c], per_channel ? as[c] : as[at + p]);
      }
  }
  return out;
}

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
  m.def("channel_fma", &channel_fma, py::arg("x"), py::arg("scale"), py::arg("addend"),
        "fma(x[b, c, p], scale[c], addend) rounded once, for float32 x (B, C, P), scale (C,) and the addend per "
        "channel (C,) or per element (B, C, P): a float32 array of x's shape.");
}

}  // namespace fplab::python
