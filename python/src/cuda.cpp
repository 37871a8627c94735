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
#include <variant>
#include <vector>

#include <pybind11/stl.h>

#include "python/src/bindings.hpp"
#include "sim/arithmetic.hpp"
#include "sim/conv_geometry.hpp"
#include "sim/cuda/addition_program.hpp"
#include "sim/cuda/gpu_addition_program.hpp"
#include "sim/cuda/gpu_batch_norm.hpp"
#include "sim/cuda/gpu_batch_norm_cudnn.hpp"
#include "sim/cuda/gpu_conv.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_exact.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_k_order.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/gpu_reduce.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "sim/cuda/gpu_tensor_core_gemm.hpp"
#include "sim/cuda/gpu_transpose.hpp"
#include "sim/cuda/gpu_winograd.hpp"
#include "sim/cudnn_nchw_batch_norm.hpp"
#include "sim/engine.hpp"
#include "sim/schedule.hpp"
#include "sim/tree_as_shuffle.hpp"
#include "sim/winograd_wgrad.hpp"

namespace fplab::python {
namespace {

namespace gpu = sim::gpu;

struct DeviceKernels {
  gpu::GpuGemm gemm;
  gpu::GpuTensorCoreGemm tensor_core_gemm;  // fused(tc-h100-*) schedules, on the chip's tensor cores
  gpu::GpuSegmentedReduction sums;
  gpu::GpuSeededReduction seeded;  // schedules with atomic steps, in the impl seed's orders
  gpu::GpuKOrder k_order;          // operands gathered for a schedule that first reorders K
  gpu::GpuAdditionProgram programs;  // the orders no other kernel takes: a thread an output
  gpu::GpuExact exact;               // all:exact (the `exact` profile)
  // A convolution's intermediates: its weight as the GEMM's B (taps x C_out; backward: as the
  // col2im pass reads it), the GEMM's output rows (positions x C_out, forward; the output
  // gradient's rows, backward), the weight gradient as the GEMM makes it (taps x C_out).
  gpu::DeviceBuffer conv_weight, conv_rows, conv_dw;
  // A cuDNN-form batch norm's two operands as per-channel segments (cuda_dot_planes).
  gpu::DeviceBuffer dot_a, dot_b;
  size_t workspace_bytes() const {
    return gemm.workspace_bytes() + tensor_core_gemm.workspace_bytes() + sums.workspace_bytes() +
           seeded.workspace_bytes() + k_order.workspace_bytes() + programs.workspace_bytes() + exact.workspace_bytes() +
           conv_weight.bytes() + conv_rows.bytes() + conv_dw.bytes() + dot_a.bytes() + dot_b.bytes();
  }
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
float* optional_floats(uintptr_t address) { return address ? device_floats_out(address) : nullptr; }

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

// The same for n terms: also where a tree stage adds in shfl_up's pairs for that n (its groups all
// powers of two: sim::trees_as_shuffles), as cuDNN's BatchNorm backward's sums do.
std::optional<gpu::ReductionPlan> fast_plan(const sim::Schedule& schedule, size_t n) {
  if (std::optional<gpu::ReductionPlan> plan = fast_plan(schedule)) return plan;
  if (const std::optional<sim::Schedule> shuffles = sim::trees_as_shuffles(schedule, n)) return fast_plan(*shuffles);
  return std::nullopt;
}

using gpu::GemmRoute;
using gpu::OrderedGemmRoute;
using gpu::plan_ordered_gemm;

// Enqueues C = A B on the device's memory; an atomic combine in the order `key` draws, as the
// CPU engine's sim::gemm (the seeded fold); a first stage that reorders K on operands gathered in
// its order (`a_in_order`: A's columns are in that order already, as an ordered im2col makes
// them). The caller holds kernels_lock.
// A GEMM on the device: the exact sums of `all:exact` (the `exact` profile), or a kernel's route.
struct DeviceGemm {
  bool exact = false;
  OrderedGemmRoute ordered;  // when not exact

  std::vector<size_t> k_order(int64_t k) const { return exact ? std::vector<size_t>{} : ordered.k_order(k); }
};

// Throws NotRealisable as plan_ordered_gemm.
DeviceGemm plan_device_gemm(const sim::Schedule& schedule) {
  if (gpu::exact_sum_schedule(schedule)) return {true, {}};
  return {false, plan_ordered_gemm(schedule)};
}

// Whether the GEMM is one FMA chain an output over all of its k terms in K order (`all:seq`, fused
// products): what the convolutions' chains that read their operand as they go compute
// (GpuConv::direct_dgrad_on_device, forward_on_device, col2im_dgrad_on_device).
bool single_chain(const DeviceGemm& gemm, int64_t k) {
  const auto* plan = std::get_if<gpu::GemmPlan>(&gemm.ordered.rest);
  return !gemm.exact && !gemm.ordered.order && plan && plan->deterministic() && !plan->rounded_products &&
         plan->part_count(k) == 1;  // one part: no strided gathering of K either
}

void run_gemm(DeviceKernels& k, const DeviceGemm& gemm, const float* a, const float* b, float* c,
              sim::GemmShape shape, const sim::NoiseKey& key, bool a_in_order = false) {
  if (gemm.exact) return k.exact.gemm(a, b, c, shape);
  const OrderedGemmRoute& ordered = gemm.ordered;
  if (const std::vector<size_t> order = ordered.k_order(static_cast<int64_t>(shape.k)); !order.empty()) {
    const gpu::GpuKOrder::Operands gathered = k.k_order.gather(order, a_in_order ? nullptr : a, b, shape);
    if (!a_in_order) a = gathered.a;
    b = gathered.b;
  }
  const GemmRoute& route = ordered.rest;
  if (const auto* fma = std::get_if<gpu::GemmPlan>(&route); fma && !fma->deterministic())
    k.gemm.run_seeded_on_device(*fma, k.seeded, key, a, b, c, shape);
  else if (fma)
    k.gemm.run_on_device(*fma, a, b, c, shape);
  else
    k.tensor_core_gemm.run_seeded_on_device(std::get<gpu::TensorCoreGemmPlan>(route), k.seeded, key, a, b, c, shape);
}

// A GEMM of rounded products on the FMA-chain kernels (any order of theirs, a leading reordering
// included), or nothing where they do not take the order (an addition program may).
std::optional<OrderedGemmRoute> rounded_chains(const sim::Schedule& schedule) {
  try {
    OrderedGemmRoute route = plan_ordered_gemm(schedule);
    auto* plan = std::get_if<gpu::GemmPlan>(&route.rest);
    if (!plan) return std::nullopt;
    plan->rounded_products = true;
    return route;
  } catch (const gpu::NotRealisable&) {
    return std::nullopt;
  }
}

// Why the kernels cannot run this reduction as `schedule` in `arithmetic` ("" when they can):
// a schedule outside the kernels' family, arithmetic other than theirs (fp32, round to nearest
// even, subnormals kept, fused products in a GEMM), or a kernel that failed its check before first
// use on this device (tensor-core GEMMs; GEMMs whose atomic combine folds in the impl seed's order).
std::string why_not(bool gemm, const sim::Schedule& schedule, const sim::Arithmetic& arithmetic, int device) {
  if (!arithmetic.native_float())
    return "arithmetic " + arithmetic.to_string() +
           " is not the kernels' (fp32, round to nearest even, subnormals kept)";
  if (gemm && arithmetic.products == sim::Products::rounded) {
    // the FMA-chain kernels with rounded products, else an addition program
    const std::optional<OrderedGemmRoute> route = rounded_chains(schedule);
    const auto* chains = route ? &std::get<gpu::GemmPlan>(route->rest) : nullptr;
    std::string why = chains ? std::string() : gpu::addition_program_why_not(schedule);
    if (why.empty() && !gpu::device_available(&why)) return why;
    if (why.empty() && chains && !chains->deterministic()) {
      py::gil_scoped_release unlocked;
      const std::lock_guard<std::mutex> held(kernels_lock);
      gpu::use_device(device);
      return gpu::seeded_gemm_why_not();
    }
    return why;
  }
  if (gpu::exact_sum_schedule(schedule) && !(gemm && arithmetic.products == sim::Products::rounded)) {
    std::string why;  // the exact kernels: any device
    return gpu::device_available(&why) ? std::string() : why;
  }
  if (gemm && arithmetic.products != sim::Products::fused)
    return "products '" + std::string(sim::products_name(arithmetic.products)) + "': the GEMM kernels fuse them or "
           "round them first";
  try {
    if (gemm) {
      const GemmRoute route = plan_ordered_gemm(schedule).rest;
      const auto* fma = std::get_if<gpu::GemmPlan>(&route);
      const auto* tensor_cores = std::get_if<gpu::TensorCoreGemmPlan>(&route);
      // a kernel checked on this device before its first use: the tensor cores' (but fused steps
      // in software) and the seeded fold of atomic parts
      const bool seeded = fma ? !fma->deterministic() : !tensor_cores->parts.deterministic();
      const bool chip = tensor_cores && !tensor_cores->cuda_cores;
      if (seeded || chip) {
        std::string why;
        if (!gpu::device_available(&why)) return why;
        py::gil_scoped_release unlocked;
        const std::lock_guard<std::mutex> held(kernels_lock);
        gpu::use_device(device);
        why = chip ? gpu::tensor_core_gemm_why_not() : std::string();
        if (why.empty() && seeded) why = gpu::seeded_gemm_why_not();
        return why;
      }
      if (tensor_cores) {  // fused steps in software: any device
        std::string why;
        return gpu::device_available(&why) ? std::string() : why;
      }
    }
    if (!gemm && !fast_plan(schedule)) gpu::plan_seeded(schedule);
  } catch (const gpu::NotRealisable& e) {
    // a sum no other kernel takes may still be an addition program (numpy's pairwise, trees)
    if (!gemm && gpu::addition_program_why_not(schedule).empty()) return {};
    return gemm ? e.what() : gpu::addition_program_why_not(schedule);
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
                 int device, uint64_t impl_seed, uint64_t op_id, uint64_t call, bool rounded_products) {
  // rounded products: the FMA-chain kernels where they take the order
  const std::optional<OrderedGemmRoute> chains = rounded_products ? rounded_chains(schedule) : std::nullopt;
  if (rounded_products) {
    if (!chains) {  // else an addition program, a thread an output
      if (const std::string why = gpu::addition_program_why_not(schedule); !why.empty()) throw gpu::NotRealisable(why);
      py::gil_scoped_release unlocked;
      const std::lock_guard<std::mutex> held(kernels_lock);
      kernels_on(device).programs.run_gemm_rounded(schedule, device_floats(a), device_floats(b), device_floats_out(c),
                                                   {m, n, k});
      return;
    }
  }
  const DeviceGemm route = chains ? DeviceGemm{false, *chains} : plan_device_gemm(schedule);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  run_gemm(kernels_on(device), route, device_floats(a), device_floats(b), device_floats_out(c), {m, n, k},
           {impl_seed, op_id, call});
}

// cuDNN's Winograd weight gradient of a 3x3 stride-1 convolution (sim/winograd_wgrad.hpp):
// x (batch, C, H, W) and gy (batch, K, out_h, out_w) to dw (K, C, 3, 3), the 36 GEMMs (K x terms
// by terms x C, fused products: fplab.torch composes rounded ones itself) as cuda_matmul runs
// them in `schedule`, position p's keyed by op_ids[p]; the transforms one row of six positions at
// a time into v (6 x terms x C floats) and u (6 x K x terms), the sums into m (36 x K x C).
// shape: (batch, C, K, H, W, padding).
void cuda_winograd_wgrad(uintptr_t x, uintptr_t gy, uintptr_t v, uintptr_t u, uintptr_t m, uintptr_t dw,
                         py::tuple shape, const sim::Schedule& schedule, int device, uint64_t impl_seed,
                         const std::vector<uint64_t>& op_ids, uint64_t call) {
  if (shape.size() != 6) throw std::invalid_argument("cuda_winograd_wgrad: shape is (batch, C, K, H, W, padding)");
  if (op_ids.size() != sim::kWinogradPositions)
    throw std::invalid_argument("cuda_winograd_wgrad: op_ids must hold one key for each of the 36 positions");
  sim::WinogradWgradShape s;
  s.batch = shape[0].cast<size_t>();
  s.in_channels = shape[1].cast<size_t>();
  s.out_channels = shape[2].cast<size_t>();
  s.height = shape[3].cast<size_t>();
  s.width = shape[4].cast<size_t>();
  s.padding = shape[5].cast<size_t>();
  if (s.height + 2 * s.padding < 3 || s.width + 2 * s.padding < 3)
    throw std::invalid_argument("cuda_winograd_wgrad: the image is smaller than the 3x3 kernel");
  const DeviceGemm gemm = plan_device_gemm(schedule);
  const size_t terms = s.terms(), kc = s.out_channels * s.in_channels;
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& kernels = kernels_on(device);
  float *v_rows = device_floats_out(v), *u_rows = device_floats_out(u), *sums = device_floats_out(m);
  // A deterministic FMA-chain plan over K in order goes to run_batched_on_device, which takes a
  // row's six GEMMs in one launch where the plan is one chain an output (cuDNN's order) and the
  // shape runs on the thin kernel, else runs them one by one.
  const gpu::GemmPlan* batched = nullptr;
  if (!gemm.exact && gemm.k_order(static_cast<int64_t>(terms)).empty())
    if (const auto* plan = std::get_if<gpu::GemmPlan>(&gemm.ordered.rest); plan && plan->deterministic())
      batched = plan;
  for (int row = 0; row < 6; ++row) {
    gpu::winograd_data_row(device_floats(x), s, row, v_rows);
    gpu::winograd_delta_row(device_floats(gy), s, row, u_rows);
    if (batched) {
      kernels.gemm.run_batched_on_device(
          *batched, u_rows, v_rows, sums + 6 * static_cast<size_t>(row) * kc, {s.out_channels, s.in_channels, terms}, 6,
          static_cast<int64_t>(s.out_channels * terms), static_cast<int64_t>(terms * s.in_channels));
      continue;
    }
    for (size_t j = 0; j < 6; ++j) {
      const size_t p = 6 * static_cast<size_t>(row) + j;
      run_gemm(kernels, gemm, u_rows + j * s.out_channels * terms, v_rows + j * terms * s.in_channels, sums + p * kc,
               {s.out_channels, s.in_channels, terms}, {impl_seed, op_ids[p], call});
    }
  }
  gpu::winograd_output(sums, s.out_channels, s.in_channels, device_floats_out(dw));
}

// The fast kernel's plan where it realises the schedule deterministically, else the seeded-order
// one's, else the addition program's (a thread an output: numpy's pairwise sums, trees).
struct SumPlans {
  sim::Schedule schedule;
  bool exact = false;  // all:exact: the exact kernel
  std::optional<gpu::ReductionPlan> fast;
  std::optional<gpu::SeededPlan> seeded;
  // n: the terms a sum has (a tree stage may then run as shuffles: fast_plan)
  SumPlans(const sim::Schedule& s, size_t n) : schedule(s), exact(gpu::exact_sum_schedule(s)), fast(fast_plan(s, n)) {
    if (fast || exact) return;
    try {
      seeded = gpu::plan_seeded(s);
    } catch (const gpu::NotRealisable&) {
      if (const std::string why = gpu::addition_program_why_not(s); !why.empty()) throw gpu::NotRealisable(why);
    }
  }
};

// A batch of sums on the fast kernel or the seeded-order one; `columns`: term t of output o at
// x[t * count + o], else at x[o * n + t]. The caller holds kernels_lock.
void sum_batch_on(DeviceKernels& k, const SumPlans& plans, const float* x, size_t n, size_t count, bool columns,
                  float* out, const sim::NoiseKey& key) {
  const gpu::BatchLayout layout{n, count, columns ? count : 1, columns ? 1 : n};
  if (plans.exact)
    k.exact.sums(x, layout, out);
  else if (plans.fast && columns)
    k.sums.run_columns(*plans.fast, x, n, count, out);
  else if (plans.fast)
    k.sums.run(*plans.fast, x, n, count, out);
  else if (plans.seeded)
    k.seeded.run(*plans.seeded, x, layout, key, sim::kBatchTileOutputs, out);
  else
    k.programs.run(plans.schedule, x, layout, out);
}

// Sums of segments the caller laid out (segment o at x[o * ld ...], gpu::segment_stride), read
// where they lie. The caller holds kernels_lock.
void sum_segments_in_place(DeviceKernels& k, const SumPlans& plans, const float* x, size_t n, size_t ld, size_t count,
                           float* out, const sim::NoiseKey& key) {
  if (plans.exact)
    k.exact.sums(x, {n, count, 1, ld}, out);
  else if (plans.fast)
    k.sums.run_in_place(*plans.fast, x, n, ld, count, out);
  else if (plans.seeded)
    k.seeded.run(*plans.seeded, x, {n, count, 1, ld}, key, sim::kBatchTileOutputs, out);
  else
    k.programs.run(plans.schedule, x, {n, count, 1, ld}, out);
}

void sum_batch(uintptr_t x, size_t n, size_t count, bool columns, uintptr_t out, const sim::Schedule& schedule,
               int device, const sim::NoiseKey& key) {
  const SumPlans plans(schedule, n);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  sum_batch_on(kernels_on(device), plans, device_floats(x), n, count, columns, device_floats_out(out), key);
}

void cuda_sum_segments(uintptr_t x, size_t n, size_t count, uintptr_t out, const sim::Schedule& schedule, int device,
                       uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  sum_batch(x, n, count, false, out, schedule, device, {impl_seed, op_id, call});
}

void cuda_sum_columns(uintptr_t x, size_t rows, size_t cols, uintptr_t out, const sim::Schedule& schedule, int device,
                      uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  sum_batch(x, rows, cols, true, out, schedule, device, {impl_seed, op_id, call});
}

gpu::PlanesShape planes_of(py::tuple shape) {
  if (shape.size() != 3) throw std::invalid_argument("cuda batch norm: shape must be (batch, channels, positions)");
  return {shape[0].cast<size_t>(), shape[1].cast<size_t>(), shape[2].cast<size_t>()};
}

// Why cuda_dot_planes cannot take a schedule and arithmetic ("" where it can).
std::string dot_why_not(const sim::Schedule& schedule, const sim::Arithmetic& arithmetic, size_t n) {
  if (!arithmetic.native_float() || arithmetic.products != sim::Products::fused)
    return "a cuDNN-form batch norm's dots on the GPU: fp32, round to nearest even, products fused";
  const std::optional<gpu::ReductionPlan> plan = fast_plan(schedule, n);
  if (!plan) return "schedule '" + sim::to_string(schedule) + "' is not the reduction kernel's (deterministically)";
  if (std::string why = gpu::dot_why_not(*plan); !why.empty()) return why;
  std::string why;
  return gpu::device_available(&why) ? std::string() : why;
}

// fma(x, scale[c], addend) elementwise on the device (x, addend when per element, out: (batch,
// channels, positions) float32; scale and a per-channel addend: channels floats).
void cuda_channel_fma(uintptr_t x, uintptr_t scale, uintptr_t addend, bool addend_per_element, py::tuple shape,
                      uintptr_t out, int device) {
  const gpu::PlanesShape planes = planes_of(shape);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  gpu::use_device(device);
  gpu::channel_fma(device_floats(x), device_floats(scale), device_floats(addend), addend_per_element, planes,
                   device_floats_out(out));
}

// A batch norm in cuDNN's form (python/fplab/torch/_ops_norm.py's _forward_cudnn), training: Σ x
// (bn_stats, key op_ids[0]), mean = Σ x · fl(1/n), centred = x − mean, the fused dot Σ d·d in the
// same schedule, then var, the running statistics, inv_std (the GPU's rsqrt by fplab's table),
// scale and shift, y = fma(x, scale, shift). stats: 6 x channels device floats (rows Σ x, mean,
// Σ d·d, inv_std, scale, shift); weight and bias given; the running statistics 0 where absent.
void cuda_batch_norm_cudnn_forward(uintptr_t x, uintptr_t y, uintptr_t centred, uintptr_t stats, py::tuple shape,
                                   uintptr_t weight, uintptr_t bias, uintptr_t running_mean, uintptr_t running_var,
                                   double momentum, double eps, const sim::Schedule& schedule, int device,
                                   uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  const gpu::PlanesShape planes = planes_of(shape);
  if (!weight || !bias) throw std::invalid_argument("cuda_batch_norm_cudnn_forward: weight and bias must be given");
  const size_t c = planes.channels, n = planes.per_channel(), ld = gpu::segment_stride(planes);
  const SumPlans plans(schedule, n);
  const std::optional<gpu::ReductionPlan> dots = fast_plan(schedule, n);
  if (!dots) throw gpu::NotRealisable("cuda_batch_norm_cudnn_forward: schedule '" + sim::to_string(schedule) +
                                      "' is not the reduction kernel's (cuda_dot_why_not says why)");
  if (const std::string why = gpu::dot_why_not(*dots); !why.empty()) throw gpu::NotRealisable("cuda_batch_norm_cudnn_forward: " + why);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  float* const rows = device_floats_out(stats);
  float *const sums = rows, *const mean = rows + c, *const squares = rows + 2 * c, *const inv_std = rows + 3 * c,
               *const scale = rows + 4 * c, *const shift = rows + 5 * c;
  float* const segments = k.dot_a.reserve<float>(std::max<size_t>(ld * c, 1));
  gpu::batch_norm_segments(gpu::SegmentTerms::values, device_floats(x), nullptr, planes, segments, ld);
  sum_segments_in_place(k, plans, segments, n, ld, c, sums, {impl_seed, op_id, call});
  gpu::cudnn_mean_and_centred(device_floats(x), sums, planes, mean, device_floats_out(centred));
  gpu::batch_norm_segments(gpu::SegmentTerms::values, device_floats(centred), nullptr, planes, segments, ld);
  k.sums.run_dots_in_place(*dots, segments, segments, n, ld, c, squares);
  gpu::cudnn_statistics({mean, squares, device_floats(weight), device_floats(bias), optional_floats(running_mean),
                         optional_floats(running_var), momentum, eps},
                        planes, inv_std, scale, shift);
  gpu::channel_fma(device_floats(x), scale, shift, false, planes, device_floats_out(y));
}

// Its backward (_backward_cudnn): Σ g (bias_grad, key op_id) and the fused dot Σ g·d, dgamma,
// and dx = fma(d, a, fma(g, scale, b)) where asked for (dx non-zero). grads: 6 x channels device
// floats (rows dbeta, Σ g·d, dgamma, scale, a, b).
void cuda_batch_norm_cudnn_backward(uintptr_t gy, uintptr_t centred, uintptr_t inv_std, uintptr_t weight,
                                    uintptr_t grads, uintptr_t dx, py::tuple shape, const sim::Schedule& schedule,
                                    int device, uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  const gpu::PlanesShape planes = planes_of(shape);
  if (!weight) throw std::invalid_argument("cuda_batch_norm_cudnn_backward: weight must be given");
  const size_t c = planes.channels, n = planes.per_channel(), ld = gpu::segment_stride(planes);
  const SumPlans plans(schedule, n);
  const std::optional<gpu::ReductionPlan> dots = fast_plan(schedule, n);
  if (!dots) throw gpu::NotRealisable("cuda_batch_norm_cudnn_backward: schedule '" + sim::to_string(schedule) +
                                      "' is not the reduction kernel's (cuda_dot_why_not says why)");
  if (const std::string why = gpu::dot_why_not(*dots); !why.empty()) throw gpu::NotRealisable("cuda_batch_norm_cudnn_backward: " + why);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  float* const rows = device_floats_out(grads);
  float *const dbeta = rows, *const products = rows + c, *const dgamma = rows + 2 * c, *const scale = rows + 3 * c,
               *const a = rows + 4 * c, *const b = rows + 5 * c;
  float* const segments_g = k.dot_a.reserve<float>(std::max<size_t>(ld * c, 1));
  float* const segments_d = k.dot_b.reserve<float>(std::max<size_t>(ld * c, 1));
  gpu::batch_norm_segments(gpu::SegmentTerms::values, device_floats(gy), nullptr, planes, segments_g, ld);
  sum_segments_in_place(k, plans, segments_g, n, ld, c, dbeta, {impl_seed, op_id, call});
  gpu::batch_norm_segments(gpu::SegmentTerms::values, device_floats(centred), nullptr, planes, segments_d, ld);
  k.sums.run_dots_in_place(*dots, segments_g, segments_d, n, ld, c, products);
  gpu::cudnn_gradient_factors(dbeta, products, device_floats(inv_std), device_floats(weight), planes, dgamma, scale, a,
                              b);
  if (dx)
    gpu::cudnn_input_gradient(device_floats(gy), device_floats(centred), scale, a, b, planes, device_floats_out(dx));
}

// cuDNN's NCHW BatchNorm kernels' model on the device (sim/cudnn_nchw_batch_norm's bits): stats 3 x
// channels (mean, inv_std, var), y; the shape one cudnn_nchw_why_not accepts.
void cuda_batch_norm_nchw_forward(uintptr_t x, uintptr_t weight, uintptr_t bias, uintptr_t stats, uintptr_t y,
                                  py::tuple shape, double eps, int device, uintptr_t running_mean,
                                  uintptr_t running_var, double momentum) {
  const gpu::PlanesShape planes = planes_of(shape);
  if (const std::string why = sim::cudnn_nchw_why_not(planes.batch, planes.positions); !why.empty())
    throw std::invalid_argument(why);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  gpu::use_device(device);
  float* const rows = device_floats_out(stats);
  const size_t c = planes.channels;
  gpu::cudnn_nchw_forward(device_floats(x), device_floats(weight), device_floats(bias), planes, static_cast<float>(eps),
                          rows, rows + c, rows + 2 * c, device_floats_out(y),
                          {optional_floats(running_mean), optional_floats(running_var), momentum});
}

// Its backward: grads 4 x channels (dgamma, dbeta, and the input gradient's two factors as
// scratch), dx where non-zero.
void cuda_batch_norm_nchw_backward(uintptr_t gy, uintptr_t x, uintptr_t mean, uintptr_t inv_std, uintptr_t weight,
                                   uintptr_t grads, uintptr_t dx, py::tuple shape, int device) {
  const gpu::PlanesShape planes = planes_of(shape);
  if (const std::string why = sim::cudnn_nchw_why_not(planes.batch, planes.positions, true); !why.empty())
    throw std::invalid_argument(why);
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  gpu::use_device(device);
  float* const rows = device_floats_out(grads);
  gpu::cudnn_nchw_backward(device_floats(gy), device_floats(x), device_floats(mean), device_floats(inv_std),
                           device_floats(weight), planes, rows, rows + planes.channels, rows + 2 * planes.channels,
                           optional_floats(dx));
}

// Per channel of a and b (batch, channels, positions) the fused dot over the terms b·P + p, in the
// schedule's order (sim::channel_dots' bits): the operands laid out as segments on the device,
// then the reduction kernel with the products fused into its chains.
void cuda_dot_planes(uintptr_t a, uintptr_t b, py::tuple shape, uintptr_t out, const sim::Schedule& schedule,
                     int device) {
  const gpu::PlanesShape planes = planes_of(shape);
  const std::optional<gpu::ReductionPlan> plan = fast_plan(schedule, planes.per_channel());
  if (!plan) throw gpu::NotRealisable("cuda_dot_planes: schedule '" + sim::to_string(schedule) + "' is not the reduction kernel's");
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  const size_t n = planes.per_channel(), ld = gpu::segment_stride(planes);
  float* const segments_a = k.dot_a.reserve<float>(std::max<size_t>(ld * planes.channels, 1));
  float* const segments_b = k.dot_b.reserve<float>(std::max<size_t>(ld * planes.channels, 1));
  gpu::batch_norm_segments(gpu::SegmentTerms::values, device_floats(a), nullptr, planes, segments_a, ld);
  gpu::batch_norm_segments(gpu::SegmentTerms::values, device_floats(b), nullptr, planes, segments_b, ld);
  k.sums.run_dots_in_place(*plan, segments_a, segments_b, n, ld, planes.channels, device_floats_out(out));
}

// BatchNorm's forward (python/fplab/torch/_ops_norm.py): in training the two sums of kind
// bn_stats (parts 0 and 1: keys op_ids[0], op_ids[1]) over `segments` (scratch of channels x
// gpu::segment_stride floats), then the statistics and the output. stats: 4 x channels device floats, rows Σx, Σ(x − mean)²,
// mean, inv_std.
void cuda_batch_norm_forward(uintptr_t x, uintptr_t xhat, uintptr_t y, uintptr_t stats, uintptr_t segments,
                             py::tuple shape, uintptr_t weight, uintptr_t bias, uintptr_t running_mean,
                             uintptr_t running_var, bool training, double momentum, double eps,
                             const sim::Schedule& schedule, int device, uint64_t impl_seed, py::tuple op_ids,
                             uint64_t call) {
  const gpu::PlanesShape planes = planes_of(shape);
  const sim::NoiseKey mean_key{impl_seed, op_ids[0].cast<uint64_t>(), call};
  const sim::NoiseKey var_key{impl_seed, op_ids[1].cast<uint64_t>(), call};
  const std::optional<SumPlans> plans =
      training ? std::optional<SumPlans>(SumPlans(schedule, planes.per_channel())) : std::nullopt;
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  const size_t c = planes.channels, n = planes.per_channel();
  float* const rows = device_floats_out(stats);
  float *const sums = rows, *const squares = rows + c, *const mean = rows + 2 * c, *const inv_std = rows + 3 * c;
  // On the fast kernel the two sums read x's planes themselves (the same bits, no segments laid out:
  // two launches and two copies of x fewer a layer); else segments, then the sums.
  const auto from_planes = [&](const float* centre, float* out) {
    return plans->fast &&
           k.sums.run_planes_in_place(*plans->fast, device_floats(x), planes.batch, c, planes.positions, centre, out);
  };
  if (training && !(from_planes(nullptr, sums) && from_planes(sums, squares))) {
    const size_t ld = gpu::segment_stride(planes);
    gpu::batch_norm_segments(gpu::SegmentTerms::values, device_floats(x), nullptr, planes, device_floats_out(segments),
                             ld);
    sum_segments_in_place(k, *plans, device_floats(segments), n, ld, c, sums, mean_key);
    gpu::batch_norm_segments(gpu::SegmentTerms::centred_squares, device_floats(x), sums, planes,
                             device_floats_out(segments), ld);
    sum_segments_in_place(k, *plans, device_floats(segments), n, ld, c, squares, var_key);
  }
  gpu::batch_norm_statistics(
      {training, momentum, eps, sums, squares, optional_floats(running_mean), optional_floats(running_var)}, planes,
      mean, inv_std);
  gpu::batch_norm_output(device_floats(x), mean, inv_std, optional_floats(weight), optional_floats(bias), planes,
                         device_floats_out(xhat), device_floats_out(y));
}

// BatchNorm's backward: the sums of kind bias_grad (part 0 Σ gy into grads' row 0, part 1
// Σ gy·x̂ into row 1; grads: 2 x channels device floats), then dx where it is asked for (non-zero).
// `segments`: scratch of 2·channels x gpu::segment_stride floats (`segments_floats` of them: a
// smaller one is refused in one line, never written past), both sets of segments laid out by one
// launch. The two sums do not depend on each other: on the fast kernels (deterministic: no key
// tells them apart) they are summed by one launch of 2·channels segments, the two chains side by
// side (numpy's `all:seq` sums are bound by their chains' length, not by how many run at once);
// the seeded kernel takes them in one set of launches too, each half with its own key.
void cuda_batch_norm_backward(uintptr_t gy, uintptr_t xhat, uintptr_t inv_std, uintptr_t weight, uintptr_t grads,
                              uintptr_t segments, size_t segments_floats, uintptr_t dx, py::tuple shape, bool training,
                              const sim::Schedule& schedule, int device, uint64_t impl_seed, py::tuple op_ids,
                              uint64_t call) {
  const gpu::PlanesShape planes = planes_of(shape);
  const sim::NoiseKey beta_key{impl_seed, op_ids[0].cast<uint64_t>(), call};
  const sim::NoiseKey gamma_key{impl_seed, op_ids[1].cast<uint64_t>(), call};
  const SumPlans plans(schedule, planes.per_channel());
  const size_t c = planes.channels, n = planes.per_channel();
  const size_t ld = gpu::segment_stride(planes);
  const size_t needed = 2 * c * ld;
  if (segments_floats < needed)
    throw std::invalid_argument("cuda_batch_norm_backward: segments holds " + std::to_string(segments_floats) +
                                " floats; " + std::to_string(needed) + " needed (2 x channels x the segment stride)");
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  float *const dbeta = device_floats_out(grads), *const dgamma = dbeta + c;  // dgamma's segments follow dbeta's too
  float* const values = device_floats_out(segments);
  gpu::batch_norm_segments(gpu::SegmentTerms::values_and_products, device_floats(gy), device_floats(xhat), planes,
                           values, ld);
  if (plans.fast) {
    sum_segments_in_place(k, plans, values, n, ld, 2 * c, dbeta, beta_key);
  } else if (plans.seeded) {
    k.seeded.run(*plans.seeded, values, {n, 2 * c, 1, ld}, beta_key, c, gamma_key, sim::kBatchTileOutputs, dbeta);
  } else {
    sum_segments_in_place(k, plans, values, n, ld, c, dbeta, beta_key);
    sum_segments_in_place(k, plans, values + c * ld, n, ld, c, dgamma, gamma_key);
  }
  if (dx)
    gpu::batch_norm_input_gradient(training, device_floats(gy), device_floats(xhat), device_floats(inv_std),
                                   optional_floats(weight), dbeta, dgamma, planes, device_floats_out(dx));
}

sim::ConvGeometry geometry_of(py::tuple shape, size_t kernel, size_t stride, size_t padding) {
  const auto dim = [&](size_t i) { return shape[i].cast<size_t>(); };
  if (shape.size() != 4)
    throw std::invalid_argument("cuda convolution: shape must be (batch, channels, height, width)");
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

// A 2-D convolution with one group, a square kernel and stride, equal padding and no dilation
// (fplab.torch's _ops_conv.py, forward): im2col into `cols` (scratch of rows x taps floats), the
// weight transposed to taps x C_out, the GEMM in the fwd schedule, its rows (b, y, x) x C_out
// transposed to y (batch, C_out, out_h, out_w) with the bias added (0: none). Where the GEMM is one
// FMA chain over the taps in order and the wide tiles take it, its chains read the columns from x
// as they go (GpuConv::forward_on_device): the same bits, no columns in memory; and where y's
// planes are whole float4s, they store y themselves, bias added (no rows, no transpose).
void cuda_conv2d_forward(uintptr_t x, uintptr_t weight, uintptr_t bias, uintptr_t y, uintptr_t cols, py::tuple shape,
                         size_t out_channels, size_t kernel, size_t stride, size_t padding,
                         const sim::Schedule& schedule, int device, uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  const sim::ConvGeometry g = geometry_of(shape, kernel, stride, padding);
  const DeviceGemm route = plan_device_gemm(schedule);
  const std::vector<size_t> tap_order = route.k_order(static_cast<int64_t>(g.taps()));
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  const size_t positions = g.out_h() * g.out_w(), rows = g.rows(), taps = g.taps();
  float* const w_t = k.conv_weight.reserve<float>(taps * out_channels);
  float* const out = k.conv_rows.reserve<float>(rows * out_channels);
  gpu::transpose_batches_on_device(device_floats(weight), 1, out_channels, taps, nullptr, w_t);
  const bool one_chain = single_chain(route, static_cast<int64_t>(taps));
  if (one_chain && gpu::GpuConv::planar_fits(positions, device_floats(y)) &&
      gpu::GpuConv::forward_on_device(g, out_channels, device_floats(x), w_t, device_floats_out(y),
                                      {true, optional_floats(bias)}))
    return;  // the chains stored y themselves, bias added
  if (!one_chain || !gpu::GpuConv::forward_on_device(g, out_channels, device_floats(x), w_t, out)) {
    // A schedule that first reorders the taps: the columns made in that order (no second copy of them)
    gpu::GpuConv::im2col_on_device(g, device_floats(x), device_floats_out(cols), false,
                                   tap_order.empty() ? nullptr : k.k_order.on_device(tap_order));
    run_gemm(k, route, device_floats(cols), w_t, out, {rows, out_channels, taps}, {impl_seed, op_id, call}, true);
  }
  gpu::transpose_batches_on_device(out, g.batch, positions, out_channels, optional_floats(bias), device_floats_out(y));
}

// Its backward: the output gradient gy (batch, C_out, out_h, out_w) as rows (b, y, x) x C_out; the
// weight gradient (gw, C_out x taps: 0 when not wanted) from the transposed columns (in `cols`)
// in the wgrad schedule, the bias gradient (gb: 0 when not wanted) as the rows' column sums in the
// bias_grad schedule keyed (impl_seed, bias_op_id, call), the input gradient (dx: 0 when not
// wanted) from the columns' gradient (in `cols`) in the dgrad schedule and col2im; where that
// GEMM is one FMA chain over C_out and the wide tiles take it, in one pass that reads gy as it goes
// (GpuConv::col2im_dgrad_on_device: the same bits, the columns' gradient not in memory; stored
// as dx itself where its planes are whole float4s, else as rows then transposed). gy's rows
// are made only for the steps that read them.
void cuda_conv2d_backward(uintptr_t x, uintptr_t weight, uintptr_t gy, uintptr_t cols, uintptr_t gw, uintptr_t gb,
                          uintptr_t dx, py::tuple shape, size_t out_channels, size_t kernel, size_t stride,
                          size_t padding, const sim::Schedule& wgrad, const sim::Schedule& dgrad,
                          const sim::Schedule& bias_grad, int device, uint64_t impl_seed, uint64_t wgrad_op_id,
                          uint64_t bias_op_id, uint64_t dgrad_op_id, uint64_t call) {
  const sim::ConvGeometry g = geometry_of(shape, kernel, stride, padding);
  const std::optional<DeviceGemm> wgrad_plan = gw ? std::optional(plan_device_gemm(wgrad)) : std::nullopt;
  const std::optional<DeviceGemm> dgrad_plan = dx ? std::optional(plan_device_gemm(dgrad)) : std::nullopt;
  const std::optional<SumPlans> bias_plans = gb ? std::optional<SumPlans>(SumPlans(bias_grad, g.rows())) : std::nullopt;
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  const size_t positions = g.out_h() * g.out_w(), rows = g.rows(), taps = g.taps();
  float* gy_rows = nullptr;
  const auto output_gradient_rows = [&] {
    if (!gy_rows) {
      gy_rows = k.conv_rows.reserve<float>(rows * out_channels);
      gpu::transpose_batches_on_device(device_floats(gy), g.batch, out_channels, positions, nullptr, gy_rows);
    }
    return gy_rows;
  };
  if (wgrad_plan) {
    float* const dw = k.conv_dw.reserve<float>(taps * out_channels);
    gpu::GpuConv::im2col_on_device(g, device_floats(x), device_floats_out(cols), true);
    run_gemm(k, *wgrad_plan, device_floats(cols), output_gradient_rows(), dw, {taps, out_channels, rows},
             {impl_seed, wgrad_op_id, call});
    gpu::transpose_batches_on_device(dw, 1, taps, out_channels, nullptr, device_floats_out(gw));
  }
  if (bias_plans)
    sum_batch_on(k, *bias_plans, output_gradient_rows(), rows, out_channels, true, device_floats_out(gb),
                 {impl_seed, bias_op_id, call});
  // The input gradient's rows go to the columns' scratch, done with (the weight gradient read
  // them before), where it holds them: not where the columns are fewer than the input's elements
  // (a stride above the kernel, as a strided 1 x 1 layer's), whose rows in a buffer of their own
  // would raise the peak memory by as much.
  const bool one_chain = dgrad_plan && single_chain(*dgrad_plan, static_cast<int64_t>(out_channels));
  if (one_chain && gpu::GpuConv::planar_fits(g.height * g.width, device_floats(dx))) {
    float* const w_offsets = k.conv_weight.reserve<float>(taps * out_channels);
    // The columns' scratch may hold the kernel offsets' chains apart, for grids short of blocks
    if (gpu::GpuConv::col2im_dgrad_on_device(g, out_channels, device_floats(gy), device_floats(weight), w_offsets,
                                             device_floats_out(dx), {true, nullptr},
                                             {device_floats_out(cols), rows * taps}))
      return;  // the pass stored dx itself
  }
  if (one_chain && g.input_size() <= rows * taps) {
    float* const w_offsets = k.conv_weight.reserve<float>(taps * out_channels);
    float* const dx_rows = device_floats_out(cols);
    if (gpu::GpuConv::col2im_dgrad_on_device(g, out_channels, device_floats(gy), device_floats(weight), w_offsets,
                                             dx_rows)) {
      gpu::transpose_batches_on_device(dx_rows, g.batch, g.height * g.width, g.channels, nullptr,
                                       device_floats_out(dx));
      return;
    }
  }
  if (dgrad_plan) {
    run_gemm(k, *dgrad_plan, output_gradient_rows(), device_floats(weight), device_floats_out(cols),
             {rows, taps, out_channels}, {impl_seed, dgrad_op_id, call});
    gpu::GpuConv::col2im_on_device(g, device_floats(cols), device_floats_out(dx));
  }
}

// conv_dgrad "direct" (fplab.torch's _direct_input_grad, the same bits), one group: the input
// gradient dx (shape: the input's (batch, channels, height, width)) from the output gradient gy
// and the weight (out_channels, channels, k, k), `slab_images` images at a time: per slab the
// gathered taps (rows (b, y, x), columns (c, i, j)) times the weight as (c, i, j) x channels in
// the dgrad schedule (keyed op_id, call), the rows transposed into dx.
void cuda_conv2d_direct_dgrad(uintptr_t gy, uintptr_t weight, uintptr_t dx, py::tuple shape, size_t out_channels,
                              size_t kernel, size_t stride, size_t padding, const sim::Schedule& dgrad,
                              size_t slab_images, int device, uint64_t impl_seed, uint64_t op_id, uint64_t call) {
  const sim::ConvGeometry g = geometry_of(shape, kernel, stride, padding);
  const DeviceGemm plan = plan_device_gemm(dgrad);
  if (slab_images == 0) throw std::invalid_argument("cuda_conv2d_direct_dgrad: slab_images must be at least 1");
  py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(kernels_lock);
  DeviceKernels& k = kernels_on(device);
  const size_t kk = kernel * kernel, pixels = g.height * g.width, depth = out_channels * kk;
  const size_t out_plane = out_channels * g.out_h() * g.out_w();
  float* const w_taps = k.conv_weight.reserve<float>(depth * g.channels);
  // weight (out_channels, channels, kk) -> (out_channels, kk, channels): rows (c, i, j)
  gpu::transpose_batches_on_device(device_floats(weight), out_channels, g.channels, kk, nullptr, w_taps);
  if (single_chain(plan, static_cast<int64_t>(depth))) {  // every image at once, no taps in memory
    if (gpu::GpuConv::planar_fits(pixels, device_floats(dx)) &&
        gpu::GpuConv::direct_dgrad_on_device(g, out_channels, device_floats(gy), w_taps, device_floats_out(dx),
                                             {true, nullptr}))
      return;  // the chains stored dx themselves
    float* const rows = k.conv_rows.reserve<float>(g.batch * pixels * g.channels);
    if (gpu::GpuConv::direct_dgrad_on_device(g, out_channels, device_floats(gy), w_taps, rows)) {
      gpu::transpose_batches_on_device(rows, g.batch, pixels, g.channels, nullptr, device_floats_out(dx));
      return;
    }
  }
  const size_t images = std::min(slab_images, g.batch);
  float* const taps = k.conv_dw.reserve<float>(images * pixels * depth);
  float* const rows = k.conv_rows.reserve<float>(images * pixels * g.channels);
  for (size_t first = 0; first < g.batch; first += images) {
    const size_t count = std::min(images, g.batch - first);
    gpu::GpuConv::dgrad_taps_on_device(g, out_channels, device_floats(gy) + first * out_plane, count, taps);
    run_gemm(k, plan, taps, w_taps, rows, {count * pixels, g.channels, depth}, {impl_seed, op_id, call});
    gpu::transpose_batches_on_device(rows, count, pixels, g.channels, nullptr,
                                     device_floats_out(dx) + first * g.channels * pixels);
  }
}

size_t cuda_workspace_bytes() {
  const std::lock_guard<std::mutex> held(kernels_lock);
  size_t bytes = 0;
  for (const auto& [device, kernels] : devices()) bytes += kernels->workspace_bytes();
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
  m.def("cuda_why_not", &why_not, py::arg("gemm"), py::arg("schedule"), py::arg("arithmetic"), py::arg("device") = 0,
        "Why fplab's CUDA kernels cannot run a GEMM (gemm=True) or a reduction in this schedule and arithmetic "
        "with the CPU engine's bits on the device: one line, or '' when they can.");
  m.def("cuda_dot_why_not", &dot_why_not, py::arg("schedule"), py::arg("arithmetic"), py::arg("n"),
        "Why cuda_dot_planes cannot run a cuDNN-form batch norm's dots of n terms a channel in this schedule and "
        "arithmetic with the CPU engine's bits: one line, or '' when it can.");
  m.def("cuda_dot_planes", &cuda_dot_planes, py::arg("a"), py::arg("b"), py::arg("shape"), py::arg("out"),
        py::arg("schedule"), py::arg("device") = 0,
        "out[c] = per channel the dot of a and b (device addresses of float32 (batch, channels, positions) tensors) "
        "over the terms b*P + p, each product fused into the schedule's chains (dot_planes' bits); out: channels "
        "device floats. Enqueued on the default stream.");
  m.def("cuda_batch_norm_cudnn_forward", &cuda_batch_norm_cudnn_forward, py::arg("x"), py::arg("y"),
        py::arg("centred"), py::arg("stats"), py::arg("shape"), py::arg("weight"), py::arg("bias"),
        py::arg("running_mean"), py::arg("running_var"), py::arg("momentum"), py::arg("eps"), py::arg("schedule"),
        py::arg("device"), py::arg("impl_seed"), py::arg("op_id"), py::arg("call"),
        "A batch norm in cuDNN's form on the device, training (fplab.torch's _forward_cudnn, the same bits): x, y, "
        "centred (batch, channels, positions) float32 device addresses, stats 6 x channels (sums, mean, sums of "
        "squares, inv_std, scale, shift), weight and bias given, running statistics 0 where absent; the schedule "
        "one the reduction kernel takes with fused products (cuda_dot_why_not). Enqueued on the default stream.");
  m.def("cuda_batch_norm_cudnn_backward", &cuda_batch_norm_cudnn_backward, py::arg("gy"), py::arg("centred"),
        py::arg("inv_std"), py::arg("weight"), py::arg("grads"), py::arg("dx"), py::arg("shape"), py::arg("schedule"),
        py::arg("device"), py::arg("impl_seed"), py::arg("op_id"), py::arg("call"),
        "Its backward (_backward_cudnn): grads 6 x channels device floats (dbeta, the dot of gy and centred, dgamma, "
        "scale, a, b), dx 0 when not wanted. Enqueued on the default stream.");
  m.def("cuda_conv2d_direct_dgrad", &cuda_conv2d_direct_dgrad, py::arg("gy"), py::arg("weight"), py::arg("dx"),
        py::arg("shape"), py::arg("out_channels"), py::arg("kernel"), py::arg("stride"), py::arg("padding"),
        py::arg("dgrad"), py::arg("slab_images"), py::arg("device"), py::arg("impl_seed"), py::arg("op_id"),
        py::arg("call"),
        "A convolution's input gradient as conv_dgrad 'direct' adds it (one group, square geometry): dx (shape, the "
        "input's) from gy and the weight, device addresses of float32 tensors; slab_images images a GEMM (all of "
        "them where the dgrad schedule draws noise). Enqueued on the default stream.");
  m.def("cuda_batch_norm_nchw_forward", &cuda_batch_norm_nchw_forward, py::arg("x"), py::arg("weight"),
        py::arg("bias"), py::arg("stats"), py::arg("y"), py::arg("shape"), py::arg("eps"), py::arg("device"),
        py::arg("running_mean") = 0, py::arg("running_var") = 0, py::arg("momentum") = 0.1,
        "cuDNN's NCHW BatchNorm kernels' model (fplab._core.cudnn_nchw_forward's bits) on the device: x, y (batch, "
        "channels, positions) float32 device addresses, stats 3 x channels (mean, inv_std, var); the running "
        "statistics (channels floats each, 0 where absent) moved by momentum as fplab.torch moves them. Enqueued on "
        "the default stream.");
  m.def("cuda_batch_norm_nchw_backward", &cuda_batch_norm_nchw_backward, py::arg("gy"), py::arg("x"), py::arg("mean"),
        py::arg("inv_std"), py::arg("weight"), py::arg("grads"), py::arg("dx"), py::arg("shape"), py::arg("device"),
        "Its backward (cudnn_nchw_backward's bits): grads 4 x channels (dgamma, dbeta, then scratch), dx 0 when not "
        "wanted.");
  m.def("cuda_channel_fma", &cuda_channel_fma, py::arg("x"), py::arg("scale"), py::arg("addend"),
        py::arg("addend_per_element"), py::arg("shape"), py::arg("out"), py::arg("device") = 0,
        "out = fma(x, scale[c], addend) on the device, one rounding: x, out (and addend where per element) device "
        "addresses of float32 (batch, channels, positions) tensors, scale (and a per-channel addend) of channels "
        "floats. Enqueued on the default stream.");
  m.def("cuda_matmul", &cuda_matmul, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::arg("schedule"), py::arg("device") = 0, py::arg("impl_seed") = 0, py::arg("op_id") = 0,
        py::arg("call") = 0, py::arg("rounded_products") = false,
        "C = A B on the device: a, b, c the addresses of dense row-major float32 matrices (m x k, k x n, m x n) in "
        "device memory; c must not overlap a or b. An atomic combine of split-K parts in the order the noise key "
        "(impl_seed, op_id, call; tiles of 4 x 64 outputs) draws, as matmul; rounded_products: every product "
        "rounded to float32 before it is added (products='rounded'). Enqueued on the default stream.");
  m.def(
      "cuda_winograd_wgrad", &cuda_winograd_wgrad, py::arg("x"), py::arg("gy"), py::arg("v"), py::arg("u"),
      py::arg("m"), py::arg("dw"), py::arg("shape"), py::arg("schedule"), py::arg("device") = 0,
      py::arg("impl_seed") = 0, py::arg("op_ids") = std::vector<uint64_t>{}, py::arg("call") = 0,
      "dw (K, C, 3, 3) of a 3x3 stride-1 convolution by cuDNN's Winograd transforms and 36 GEMMs of fused products as "
      "cuda_matmul runs them (position p keyed by op_ids[p]): x (batch, C, H, W), gy (batch, K, out_h, out_w); scratch "
      "v (6 x terms x C floats), u (6 x K x terms), m (36 x K x C), terms = batch x tiles; shape (batch, C, K, H, W, "
      "padding). Device addresses of float32 memory; enqueued on the default stream.");
  m.def("cuda_sum_segments", &cuda_sum_segments, py::arg("x"), py::arg("n"), py::arg("count"), py::arg("out"),
        py::arg("schedule"), py::arg("device") = 0, py::arg("impl_seed") = 0, py::arg("op_id") = 0, py::arg("call") = 0,
        "out[s] = the reduction of x[s*n : s*n + n] for s < count in the schedule's order (float32 device memory); "
        "atomic steps in the order the noise key (impl_seed, op_id, call; tiles of 64 outputs) draws, as "
        "reduce_batch.");
  m.def("cuda_sum_columns", &cuda_sum_columns, py::arg("x"), py::arg("rows"), py::arg("cols"), py::arg("out"),
        py::arg("schedule"), py::arg("device") = 0, py::arg("impl_seed") = 0, py::arg("op_id") = 0, py::arg("call") = 0,
        "out[j] = the reduction of column j of x (rows x cols, row-major float32 device memory) over its rows in "
        "row order, in the schedule's order (atomic steps keyed as cuda_sum_segments).");
  m.def("cuda_batch_norm_forward", &cuda_batch_norm_forward, py::arg("x"), py::arg("xhat"), py::arg("y"),
        py::arg("stats"), py::arg("segments"), py::arg("shape"), py::arg("weight"), py::arg("bias"),
        py::arg("running_mean"), py::arg("running_var"), py::arg("training"), py::arg("momentum"), py::arg("eps"),
        py::arg("schedule"), py::arg("device"), py::arg("impl_seed"), py::arg("op_ids"), py::arg("call"),
        "BatchNorm's forward on the device (fplab.torch's formulas, the CPU's bits): x (batch, channels, positions), "
        "xhat and y the same size, stats 4 x channels (sums, sums of squares, mean, inv_std), segments scratch of "
        "channels x (batch * positions rounded up to a multiple of 4) floats, 16-byte aligned; weight, bias and the "
        "running statistics 0 where absent. Training: the two sums in the schedule's "
        "order, keyed (impl_seed, op_ids[0 or 1], call); the running statistics move. Enqueued on the default "
        "stream.");
  m.def("cuda_batch_norm_backward", &cuda_batch_norm_backward, py::arg("gy"), py::arg("xhat"), py::arg("inv_std"),
        py::arg("weight"), py::arg("grads"), py::arg("segments"), py::arg("segments_floats"), py::arg("dx"),
        py::arg("shape"), py::arg("training"),
        py::arg("schedule"), py::arg("device"), py::arg("impl_seed"), py::arg("op_ids"), py::arg("call"),
        "BatchNorm's backward on the device: grads (2 x channels) receives the bias and weight gradients (the "
        "schedule's sums, keyed op_ids[0] and op_ids[1]), dx (0: not wanted) the input's gradient; segments is scratch "
        "of segments_floats floats, at least 2 x channels rows of the segment stride. Enqueued on the default stream.");
  m.def("cuda_im2col", &cuda_im2col, py::arg("x"), py::arg("cols"), py::arg("shape"), py::arg("kernel"),
        py::arg("stride"), py::arg("padding"), py::arg("transposed") = false, py::arg("device") = 0,
        "The im2col columns of x (shape: batch, channels, height, width; square kernel, zero padding) on the device: "
        "rows (b, oy, ox) x columns (c, i, j), or their transpose.");
  m.def("cuda_col2im", &cuda_col2im, py::arg("dcols"), py::arg("dx"), py::arg("shape"), py::arg("kernel"),
        py::arg("stride"), py::arg("padding"), py::arg("device") = 0,
        "dx (shape) from the columns' gradient on the device: each element the float32 sum, from +0, of its terms in "
        "the order of the columns' rows (models/conv2d.cpp's col2im).");
  m.def("cuda_conv2d_forward", &cuda_conv2d_forward, py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("y"),
        py::arg("cols"), py::arg("shape"), py::arg("out_channels"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("schedule"), py::arg("device"), py::arg("impl_seed") = 0, py::arg("op_id") = 0,
        py::arg("call") = 0,
        "A convolution's forward on the device (one group, square kernel and stride, no dilation): im2col into cols "
        "(scratch, rows x taps), the GEMM in the schedule's order (keyed (impl_seed, op_id, call)), y (batch, C_out, "
        "out_h, out_w) with the bias (0: none) added. Enqueued on the default stream.");
  m.def("cuda_conv2d_backward", &cuda_conv2d_backward, py::arg("x"), py::arg("weight"), py::arg("gy"), py::arg("cols"),
        py::arg("gw"), py::arg("gb"), py::arg("dx"), py::arg("shape"), py::arg("out_channels"), py::arg("kernel"),
        py::arg("stride"), py::arg("padding"), py::arg("wgrad"), py::arg("dgrad"), py::arg("bias_grad"),
        py::arg("device"), py::arg("impl_seed"), py::arg("wgrad_op_id"), py::arg("bias_op_id"),
        py::arg("dgrad_op_id"), py::arg("call"),
        "Its backward: the weight gradient gw (C_out x taps), the bias gradient gb (the bias_grad sums) and the input "
        "gradient dx, each 0 when not wanted, keyed (impl_seed, wgrad/bias/dgrad op id, call); cols is scratch of "
        "rows x taps. Enqueued on the default stream.");
  m.def("cuda_workspace_bytes", &cuda_workspace_bytes,
        "Bytes of device memory fplab's kernels hold for their workspaces, on every device (outside PyTorch's "
        "allocator: add it to torch.cuda.max_memory_allocated() for the peak).");
  m.def("cuda_synchronize", &cuda_synchronize, py::arg("device") = 0,
        "Waits until the work fplab enqueued on the device has finished.");
}

}  // namespace fplab::python
