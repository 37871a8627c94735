// The Python module fplab._core: each file of python/src/ binds one concept, and module.cpp calls
// them in order. The pure-Python package (python/fplab/__init__.py) wraps these with defaults and
// docstrings; fplab.torch builds on them directly.
//
// Assumptions stated once: every binding that works on an array takes what NumPy gives it without
// a copy where the dtype and layout already fit (float64, or float32 for matmul, C-contiguous),
// converts otherwise, and releases the GIL around the C++ work, touching no Python object there.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace fplab::python {

namespace py = pybind11;

// An array of doubles, C-contiguous: the caller's own array when it already is one.
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
// A 3-D float32 NumPy array (batch, channels, positions), C-contiguous (a copy where it is not);
// anything else a one-line ValueError naming function and argument (dot_planes.cpp).
FloatArray float32_planes(py::handle object, const char* function, const char* name);

// `x` (any array-like of numbers) as doubles; `function` and `name` name it in the error
// ("reduce: x must be an array of numbers"). With `one_dimensional`, anything else is refused.
DoubleArray double_array(py::handle x, std::string_view function, std::string_view name, bool one_dimensional);

// `out` as the float32 array a result of `shape` is written into: refused (one line naming
// `function`) unless it is a writeable C-contiguous float32 array of exactly that shape.
py::array_t<float> output_array(py::handle out, std::string_view function, std::initializer_list<size_t> shape);

void bind_errors(py::module_& m);
void bind_schedule(py::module_& m);
void bind_arithmetic(py::module_& m);
void bind_round(py::module_& m);
void bind_mx_quantize(py::module_& m);
void bind_reduce(py::module_& m);
void bind_dot(py::module_& m);
void bind_matmul(py::module_& m);
void bind_reduce_batch(py::module_& m);
void bind_dot_planes(py::module_& m);
void bind_cudnn_nchw(py::module_& m);
void bind_conv_columns(py::module_& m);
void bind_noise_key(py::module_& m);
void bind_profiles(py::module_& m);
// What a PyTorch script needs to reproduce a `fplab train` run (docs/python.md, the cross-check).
void bind_dataset(py::module_& m);
void bind_algo_noise(py::module_& m);
void bind_initial_model(py::module_& m);
void bind_checkpoint(py::module_& m);
void bind_elementwise(py::module_& m);
void bind_train(py::module_& m);
// What fplab.torch.experiment() needs of `fplab run`: recipe checks, replica files, statistics, reports.
void bind_experiment(py::module_& m);
void bind_figures(py::module_& m);
void bind_whole_file(py::module_& m);
void bind_paired_interval(py::module_& m);
void bind_reveal(py::module_& m);
// NCCL's all-reduce order (data-parallel training's gradient sums).
void bind_nccl(py::module_& m);
// fplab's CUDA kernels on device memory (fplab.torch's CUDA tensors), where CUDA is built.
void bind_cuda(py::module_& m);

}  // namespace fplab::python
