// fplab._core.cudnn_nchw_forward / cudnn_nchw_backward / cudnn_nchw_why_not: cuDNN's BatchNorm
// kernels for larger planes (sim/cudnn_nchw_batch_norm.hpp) on float32 planes (B, C, P), every
// channel in one call (fplab.torch's batch_norm = "cudnn-nchw"; models/batch_norm.cpp calls the same
// functions on its rows).
#include <string>
#include <tuple>

#include <pybind11/stl.h>

#include "python/src/bindings.hpp"
#include "sim/cudnn_nchw_batch_norm.hpp"

namespace fplab::python {
namespace {

FloatArray channel_values(py::handle object, const char* name, size_t channels) {
  const auto array = FloatArray::ensure(object);
  if (!array || array.ndim() != 1 || static_cast<size_t>(array.shape(0)) != channels)
    throw std::invalid_argument(std::string("cudnn_nchw: ") + name +
                                " must be a float32 array of one value a channel (" + std::to_string(channels) + ")");
  return array;
}

sim::NchwPlane plane(const FloatArray& a, size_t c) {
  const auto channels = static_cast<size_t>(a.shape(1)), positions = static_cast<size_t>(a.shape(2));
  return {a.data() + c * positions, static_cast<size_t>(a.shape(0)), positions, channels * positions, 1};
}

void require(const FloatArray& a, bool backward) {
  const std::string why =
      sim::cudnn_nchw_why_not(static_cast<size_t>(a.shape(0)), static_cast<size_t>(a.shape(2)), backward);
  if (!why.empty()) throw std::invalid_argument(why);
}

// (y, mean, inv_std, var): y the planes' shape, the others one value a channel.
std::tuple<py::array_t<float>, py::array_t<float>, py::array_t<float>, py::array_t<float>> forward(py::handle x_in,
                                                                                                   py::handle gamma_in,
                                                                                                   py::handle beta_in,
                                                                                                   double eps) {
  const FloatArray x = float32_planes(x_in, "cudnn_nchw_forward", "x");
  require(x, false);
  const auto channels = static_cast<size_t>(x.shape(1)), positions = static_cast<size_t>(x.shape(2));
  const FloatArray gamma = channel_values(gamma_in, "gamma", channels),
                   beta = channel_values(beta_in, "beta", channels);
  py::array_t<float> y({x.shape(0), x.shape(1), x.shape(2)});
  py::array_t<float> mean(static_cast<py::ssize_t>(channels)), inv_std(static_cast<py::ssize_t>(channels)),
      var(static_cast<py::ssize_t>(channels));
  float *y_data = y.mutable_data(), *mean_data = mean.mutable_data(), *inv_data = inv_std.mutable_data(),
        *var_data = var.mutable_data();
  {
    py::gil_scoped_release unlocked;
    for (size_t c = 0; c < channels; ++c) {
      const sim::NchwPlane p = plane(x, c);
      const sim::NchwStatistics s = sim::cudnn_nchw_statistics(p, static_cast<float>(eps));
      mean_data[c] = s.mean, inv_data[c] = s.inv_std, var_data[c] = s.var;
      for (size_t b = 0; b < p.batch; ++b)
        for (size_t i = 0; i < positions; ++i)
          y_data[b * p.image_stride + c * positions + i] =
              sim::cudnn_nchw_output(p.at(b, i), s, gamma.data()[c], beta.data()[c]);
    }
  }
  return {y, mean, inv_std, var};
}

// (dx, dgamma, dbeta) from the output gradient g and the forward's x, mean and inv_std.
std::tuple<py::array_t<float>, py::array_t<float>, py::array_t<float>> backward(py::handle g_in, py::handle x_in,
                                                                                py::handle mean_in, py::handle inv_in,
                                                                                py::handle gamma_in) {
  const FloatArray g = float32_planes(g_in, "cudnn_nchw_backward", "g");
  const FloatArray x = float32_planes(x_in, "cudnn_nchw_backward", "x");
  for (int d = 0; d < 3; ++d)
    if (g.shape(d) != x.shape(d)) throw std::invalid_argument("cudnn_nchw_backward: g and x must have the same shape");
  require(g, true);
  const auto channels = static_cast<size_t>(g.shape(1)), positions = static_cast<size_t>(g.shape(2));
  const FloatArray mean = channel_values(mean_in, "mean", channels),
                   inv_std = channel_values(inv_in, "inv_std", channels),
                   gamma = channel_values(gamma_in, "gamma", channels);
  py::array_t<float> dx({g.shape(0), g.shape(1), g.shape(2)});
  py::array_t<float> dgamma(static_cast<py::ssize_t>(channels)), dbeta(static_cast<py::ssize_t>(channels));
  float *dx_data = dx.mutable_data(), *dgamma_data = dgamma.mutable_data(), *dbeta_data = dbeta.mutable_data();
  {
    py::gil_scoped_release unlocked;
    for (size_t c = 0; c < channels; ++c) {
      const sim::NchwPlane gp = plane(g, c), xp = plane(x, c);
      sim::NchwStatistics s;
      s.mean = mean.data()[c], s.inv_std = inv_std.data()[c];
      const sim::NchwGradients grads = sim::cudnn_nchw_gradients(gp, xp, s);
      dgamma_data[c] = grads.dgamma, dbeta_data[c] = grads.dbeta;
      for (size_t b = 0; b < gp.batch; ++b)
        for (size_t i = 0; i < positions; ++i)
          dx_data[b * gp.image_stride + c * positions + i] =
              sim::cudnn_nchw_input_gradient(gp.at(b, i), xp.at(b, i), s, grads, gamma.data()[c]);
    }
  }
  return {dx, dgamma, dbeta};
}

}  // namespace

void bind_cudnn_nchw(py::module_& m) {
  m.def("cudnn_nchw_why_not", &sim::cudnn_nchw_why_not, py::arg("batch"), py::arg("positions"),
        py::arg("backward") = false,
        "Why the model of cuDNN's NCHW BatchNorm kernels (backward: the backward kernel alone) cannot take a "
        "channel of batch x positions values: one line, or '' when it can.");
  m.def("cudnn_nchw_forward", &forward, py::arg("x"), py::arg("gamma"), py::arg("beta"), py::arg("eps"),
        "cuDNN's bn_fw_tr_1C11_kernel_NCHW on float32 planes x (B, C, P): (y, mean, inv_std, var), the last three "
        "one value a channel (var: the variance for the running statistics).");
  m.def("cudnn_nchw_backward", &backward, py::arg("g"), py::arg("x"), py::arg("mean"), py::arg("inv_std"),
        py::arg("gamma"),
        "cuDNN's bn_bw_1C11_kernel_new on float32 planes g and x (B, C, P) with the forward's mean and inv_std: "
        "(dx, dgamma, dbeta).");
}

}  // namespace fplab::python
