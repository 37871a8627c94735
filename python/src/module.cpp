// fplab._core: the C++ side of the Python package fplab (python/fplab/__init__.py is the public face).
#include "python/src/bindings.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "fplab's C++ core: formats and rounding, schedules, the fast engine, hardware profiles.";
  m.attr("__version__") = FPLAB_VERSION;
  using namespace fplab::python;
  bind_errors(m);
  bind_schedule(m);
  bind_arithmetic(m);
  bind_round(m);
  bind_mx_quantize(m);
  bind_reduce(m);
  bind_dot(m);
  bind_matmul(m);
  bind_reduce_batch(m);
  bind_dot_planes(m);
  bind_cudnn_nchw(m);
  bind_conv_columns(m);
  bind_noise_key(m);
  bind_profiles(m);
  bind_dataset(m);
  bind_algo_noise(m);
  bind_initial_model(m);
  bind_checkpoint(m);
  bind_elementwise(m);
  bind_train(m);
  bind_experiment(m);
  bind_figures(m);
  bind_whole_file(m);
  bind_paired_interval(m);
  bind_reveal(m);
  bind_nccl(m);
#ifdef FPLAB_PYTHON_CUDA
  bind_cuda(m);
#endif
}
