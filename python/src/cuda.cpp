// fplab._core's CUDA functions: fplab's GPU kernels (sim/cuda/) on memory another library
// allocated on the device (PyTorch's CUDA tensors, for fplab.torch), addressed by its pointer
// (tensor.data_ptr()). Nothing crosses to the host. Built only where CUDA is (fplab::cuda); where
// it is not, the module has none of these names and fplab.torch runs CUDA tensors natively.
//
// The kernels are enqueued on the device's legacy default stream, which PyTorch's default stream
// is; fplab.torch waits for other streams itself. One set of kernel objects (with their
// workspaces, grown and kept) per device, behind one lock: the GIL is released around the work.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "python/src/bindings.hpp"
#include "sim/arithmetic.hpp"
#include "sim/conv_geometry.hpp"
#include "sim/cuda/gpu_conv.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/gpu_reduce.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "sim/engine.hpp"
#include "sim/schedule.hpp"

namespace fplab::python {
namespace {

namespace gpu = sim::gpu;

struct DeviceKernels {
  gpu::GpuGemm gemm;
  gpu::GpuSegmentedReduction sums;
  gpu::GpuSeededReduction seeded;  // schedules with atomic steps, in the impl seed's orders
};

std::mutex kernels_lock;

// The kernels of `device`, made current. Never destroyed: at interpreter exit the CUDA runtime may
// already be gone, and the driver frees the memory with the process.
std::map<int, std::unique_ptr<DeviceKernels>>& devices() {
  static auto* by_device = new std::map<int, std::unique_ptr<DeviceKernels>>;
  return *by_device;
}

DeviceKernels& kernels_on(int device) {
  gpu::use_device(device);
  auto& slot = devices()[device];
  if (!slot) slot = std::make_unique<DeviceKernels>();
  return *slot;
}

const float* device_floats(uintptr_t address) { return reinterpret_cast<const float*>(address); }
float* device_floats_out(uintptr_t address) { return reinterpret_cast<float*>(address); }

// A reduction runs on the fast kernel where it realises the schedule deterministically (its
// atomic combine adds in the hardware's order, not the impl seed's), else on the seeded-order one.
std::optional<gpu::ReductionPlan> fast_plan(const sim::Schedule& schedule) {
  try {
    const gpu::ReductionPlan plan = gpu::plan_reduction(schedule);
    if (plan.deterministic()) return plan;
  } catch (const gpu::NotRealisable&) {
  }
  return std::nullopt;
}

// Why the kernels cannot run this reduction as `schedule` in `arithmetic` ("" when they can):
// a schedule outside the kernels' family, arithmetic other than theirs (fp32, round to nearest
// even, subnormals kept, fused products in a GEMM), or a GEMM's atomic combine, whose order on
// the GPU is the hardware's and not the impl seed's.
std::string why_not(bool gemm, const sim::Schedule& schedule, const sim::Arithmetic& arithmetic) {
  if (!arithmetic.native_float())
    return "arithmetic " + arithmetic.to_string() + " is not the kernels' (fp32, round to nearest even, subnormals kept)";
  if (gemm && arithmetic.products != sim::Products::fused)
    return "products '" + std::string(sim::products_name(arithmetic.products)) + "': the GEMM kernel fuses them";
  try {
    if (gemm && !gpu::plan_gemm(schedule).deterministic())
      return "an atomic combine: the GPU adds in the hardware's order, not the impl seed's";
    if (!gemm && !fast_plan(schedule)) gpu::plan_seeded(schedule);
  } catch (const gpu::NotRealisable& e) {
    return e.what();
  }
  return {};
}

std::string cuda_device(int device) {
  std::string why;
  if (!gpu::device_available(&why)) throw std::runtime_error("fplab.cuda: " + why);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  kernels_on(device);
  return gpu::device_info().describe();
}

void cuda_matmul(uintptr_t a, uintptr_t b, uintptr_t c, size_t m, size_t n, size_t k, const sim::Schedule& schedule,
                 int device) {
  const gpu::GemmPlan plan = gpu::plan_gemm(schedule);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  kernels_on(device).gemm.run_on_device(plan, device_floats(a), device_floats(b), device_floats_out(c), {m, n, k});
}

// A batch of sums on the fast kernel or the seeded-order one (fast_plan); `columns`: term t of
// output o at x[t * count + o], else at x[o * n + t].
void sum_batch(uintptr_t x, size_t n, size_t count, bool columns, uintptr_t out, const sim::Schedule& schedule,
               int device, const sim::NoiseKey& key) {
  const std::optional<gpu::ReductionPlan> fast = fast_plan(schedule);
  const gpu::SeededPlan seeded = fast ? gpu::SeededPlan{} : gpu::plan_seeded(schedule);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  if (fast && columns)
    k.sums.run_columns(*fast, device_floats(x), n, count, device_floats_out(out));
  else if (fast)
    k.sums.run(*fast, device_floats(x), n, count, device_floats_out(out));
  else
    k.seeded.run(seeded, device_floats(x), {n, count, columns ? count : 1, columns ? 1 : n}, key, sim::kBatchTileOutputs,
                 device_floats_out(out));
}

void cuda_sum_segments(uintptr_t x, size_t n, size_t count, uintptr_t out, const sim::Schedule& schedule, int device,
                       uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  sum_batch(x, n, count, false, out, schedule, device, {impl_seed, op_id, call});
}

void cuda_sum_columns(uintptr_t x, size_t rows, size_t cols, uintptr_t out, const sim::Schedule& schedule,
                      int device, uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  sum_batch(x, rows, cols, true, out, schedule, device, {impl_seed, op_id, call});
}

sim::ConvGeometry geometry_of(py::tuple shape, size_t kernel, size_t stride, size_t padding) {
  const auto dim = [&](size_t i) { return shape[i].cast<size_t>(); };
  if (shape.size() != 4) throw std::invalid_argument("cuda convolution: shape must be (batch, channels, height, width)");
  return {dim(0), dim(1), dim(2), dim(3), kernel, stride, padding};
}

void cuda_im2col(uintptr_t x, uintptr_t cols, py::tuple shape, size_t kernel, size_t stride, size_t padding,
                 bool transposed, int device) {
  const sim::ConvGeometry geometry = geometry_of(shape, kernel, stride, padding);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  gpu::use_device(device);
  gpu::GpuConv::im2col_on_device(geometry, device_floats(x), device_floats_out(cols), transposed);
}

void cuda_col2im(uintptr_t dcols, uintptr_t dx, py::tuple shape, size_t kernel, size_t stride, size_t padding,
                 int device) {
  const sim::ConvGeometry geometry = geometry_of(shape, kernel, stride, padding);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  gpu::use_device(device);
  gpu::GpuConv::col2im_on_device(geometry, device_floats(dcols), device_floats_out(dx));
}

size_t cuda_workspace_bytes() {
  const std::lock_guard<std::mutex> held(kernels_lock);
  size_t bytes = 0;
  for (const auto& [device, kernels] : devices())
    bytes += kernels->gemm.workspace_bytes() + kernels->sums.workspace_bytes() + kernels->seeded.workspace_bytes();
  return bytes;
}

void cuda_synchronize(int device) {
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  gpu::use_device(device);
  gpu::synchronize_device();
}

}  // namespace

void bind_cuda(py::module_& m) {
  m.def("cuda_device", &cuda_device, py::arg("device") = 0,
        "The CUDA device fplab's kernels run on, described in one line (name, sm, SMs, memory, CUDA versions); "
        "raises fplab.Error when there is none.");
  m.def("cuda_why_not", &why_not, py::arg("gemm"), py::arg("schedule"), py::arg("arithmetic"),
        "Why fplab's CUDA kernels cannot run a GEMM (gemm=True) or a reduction in this schedule and arithmetic "
        "with the CPU engine's bits: one line, or '' when they can.");
  m.def("cuda_matmul", &cuda_matmul, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("m"), py::arg("n"),
        py::arg("k"), py::arg("schedule"), py::arg("device") = 0,
        "C = A B on the device: a, b, c the addresses of dense row-major float32 matrices (m x k, k x n, m x n) in "
        "device memory; c must not overlap a or b. Enqueued on the default stream.");
  m.def("cuda_sum_segments", &cuda_sum_segments, py::arg("x"), py::arg("n"), py::arg("count"), py::arg("out"),
        py::arg("schedule"), py::arg("device") = 0, py::arg("impl_seed") = 0, py::arg("op_id") = 0, py::arg("call") = 0,
        "out[s] = the reduction of x[s*n : s*n + n] for s < count in the schedule's order (float32 device memory); "
        "atomic steps in the order the noise key (impl_seed, op_id, call; tiles of 64 outputs) draws, as "
        "reduce_batch.");
  m.def("cuda_sum_columns", &cuda_sum_columns, py::arg("x"), py::arg("rows"), py::arg("cols"), py::arg("out"),
        py::arg("schedule"), py::arg("device") = 0, py::arg("impl_seed") = 0, py::arg("op_id") = 0, py::arg("call") = 0,
        "out[j] = the reduction of column j of x (rows x cols, row-major float32 device memory) over its rows in "
        "row order, in the schedule's order (atomic steps keyed as cuda_sum_segments).");
  m.def("cuda_im2col", &cuda_im2col, py::arg("x"), py::arg("cols"), py::arg("shape"), py::arg("kernel"),
        py::arg("stride"), py::arg("padding"), py::arg("transposed") = false, py::arg("device") = 0,
        "The im2col columns of x (shape: batch, channels, height, width; square kernel, zero padding) on the device: "
        "rows (b, oy, ox) x columns (c, i, j), or their transpose.");
  m.def("cuda_col2im", &cuda_col2im, py::arg("dcols"), py::arg("dx"), py::arg("shape"), py::arg("kernel"),
        py::arg("stride"), py::arg("padding"), py::arg("device") = 0,
        "dx (shape) from the columns' gradient on the device: each element the float32 sum, from +0, of its terms in "
        "the order of the columns' rows (models/conv2d.cpp's col2im).");
  m.def("cuda_workspace_bytes", &cuda_workspace_bytes,
        "Bytes of device memory fplab's kernels hold for their workspaces, on every device (outside PyTorch's "
        "allocator: add it to torch.cuda.max_memory_allocated() for the peak).");
  m.def("cuda_synchronize", &cuda_synchronize, py::arg("device") = 0,
        "Waits until the work fplab enqueued on the device has finished.");
}

}  // namespace fplab::python
