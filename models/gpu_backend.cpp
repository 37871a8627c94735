#include "models/gpu_backend.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <variant>

#include "sim/cuda/gpu_conv.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/gpu_reduce.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "sim/cuda/gpu_tensor_core_gemm.hpp"

namespace fplab::models {
namespace {

namespace gpu = sim::gpu;

bool is_gemm(profiles::OpKind op) { return op == profiles::OpKind::fwd || op == profiles::OpKind::dgrad || op == profiles::OpKind::wgrad; }

// The kernels' arithmetic: __fadd_rn / __fmaf_rn in fp32, subnormals kept.
std::string arithmetic_problem(profiles::OpKind op, const sim::Arithmetic& a) {
  if (!a.native_float())
    return "arithmetic " + a.to_string() + " is not the kernels' (fp32, round to nearest even, subnormals kept)";
  if (is_gemm(op) && a.products != sim::Products::fused)
    return "products '" + std::string(sim::products_name(a.products)) + "': the GEMM kernel fuses them (FMA chains)";
  return {};
}

bool seeded_kernel_takes(const sim::Schedule& schedule) {
  try {
    (void)gpu::plan_seeded(schedule);
    return true;
  } catch (const gpu::NotRealisable&) {
    return false;
  }
}

// Plans are made per call (a few comparisons): the choice may come from any table, and an
// unrealisable one is reported with its one line rather than run some other way.
class GpuBackend final : public ComputeBackend {
 public:
  GpuBackend() : description_("cuda: " + gpu::device_info().describe()) {}

  std::string name() const override { return description_; }

  void matmul(const profiles::OpChoice& choice, const sim::NoiseKey&, const float* a, const float* b, float* c, size_t m,
              size_t n, size_t k) override {
    check(profiles::OpKind::fwd, choice);
    gemm(gpu::plan_any_gemm(choice.schedule), a, b, c, {m, n, k});
  }

  // A schedule the reduction kernel realises runs there (its atomic steps in the hardware's arrival
  // order); one it cannot (an `atomic` inside a thread's groups, h100's `strided(P):atomic |
  // all:atomic` bias gradients) runs on the seeded kernel, in the order the impl seed draws:
  // the CPU engine's bits for the same key.
  void sum_rows(const profiles::OpChoice& choice, const sim::NoiseKey& key, const float* x, size_t rows, size_t cols,
                float* out) override {
    check(profiles::OpKind::loss, choice);
    std::optional<gpu::ReductionPlan> plan;
    try {
      plan = gpu::plan_reduction(choice.schedule);
    } catch (const gpu::NotRealisable&) {
      const std::vector<float> sums =
          gpu::reduce_batch_seeded(choice.schedule, {x, rows * cols}, {rows, cols, cols, 1}, key);
      std::copy(sums.begin(), sums.end(), out);
      return;
    }
    sums_.run_columns(*plan, x, rows, cols, out);
  }

  // im2col on the device feeds the GEMM there; only x goes up and the result (and the columns,
  // for the weight gradient) come down.
  bool conv_forward(const profiles::OpChoice& choice, const sim::NoiseKey&, const sim::ConvGeometry& geometry,
                    size_t out_channels, const float* x, const float* w, float* out_rows, float* cols) override {
    check(profiles::OpKind::fwd, choice);
    const gpu::GemmRoute route = gpu::plan_any_gemm(choice.schedule);
    const float* device_cols = conv_.im2col(geometry, x, cols);
    gemm(route, device_cols, w, out_rows, {geometry.rows(), out_channels, geometry.taps()});
    return true;
  }

  // The columns' gradient stays on the device between the GEMM and col2im.
  bool conv_input_grad(const profiles::OpChoice& choice, const sim::NoiseKey&, const sim::ConvGeometry& geometry,
                       size_t out_channels, const float* g_rows, const float* w_t, float* dx) override {
    check(profiles::OpKind::dgrad, choice);
    float* const dcols = conv_.dcols_buffer(geometry);
    gemm(gpu::plan_any_gemm(choice.schedule), g_rows, w_t, dcols, {geometry.rows(), geometry.taps(), out_channels});
    conv_.col2im(geometry, dcols, dx);
    return true;
  }

 private:
  static void check(profiles::OpKind op, const profiles::OpChoice& choice) {
    const std::string problem = arithmetic_problem(op, choice.arithmetic);
    if (!problem.empty()) throw std::runtime_error("the GPU kernels cannot run " + problem);
  }

  // C = A B with operands on the host or the device, on the kernel the schedule takes.
  void gemm(const gpu::GemmRoute& route, const float* a, const float* b, float* c, sim::GemmShape shape) {
    if (const auto* fma = std::get_if<gpu::GemmPlan>(&route))
      gemm_.run_unified(*fma, a, b, c, shape);
    else
      tensor_core_gemm_.run_unified(std::get<gpu::TensorCoreGemmPlan>(route), a, b, c, shape);
  }

  std::string description_;
  gpu::GpuGemm gemm_;
  gpu::GpuTensorCoreGemm tensor_core_gemm_;  // the H100's tensor-core models (fused(tc-h100-*))
  gpu::GpuConv conv_;
  gpu::GpuSegmentedReduction sums_;
};

// Why this backend cannot run `choice` for `op` ("" where it can).
std::string choice_problem(profiles::OpKind op, const profiles::OpChoice& choice) {
  std::string problem = arithmetic_problem(op, choice.arithmetic);
  if (problem.empty()) {
    try {
      if (is_gemm(op)) {
        const gpu::GemmRoute route = gpu::plan_any_gemm(choice.schedule);
        const auto* tensor_cores = std::get_if<gpu::TensorCoreGemmPlan>(&route);
        if (tensor_cores && !tensor_cores->parts.deterministic())
          // fplab.torch folds such parts in the impl seed's order (run_seeded_on_device); this
          // backend keys no noise
          problem = "schedule '" + sim::to_string(choice.schedule) +
                    "': an atomic combine of tensor-core split-K parts (fplab.torch runs it on the GPU)";
        else if (tensor_cores && !tensor_cores->cuda_cores)
          problem = gpu::tensor_core_gemm_why_not();  // a Hopper GPU that reproduces the model
      } else {
        try {
          (void)gpu::plan_reduction(choice.schedule);
        } catch (const gpu::NotRealisable&) {
          if (!seeded_kernel_takes(choice.schedule)) throw;  // the reduction kernel's line says why
        }
      }
    } catch (const gpu::NotRealisable& e) {
      problem = e.what();
    }
  }
  return problem;
}

}  // namespace

std::vector<std::string> gpu_unsupported_ops(const profiles::OpTable& table) {
  std::vector<std::string> problems;
  for (profiles::OpKind op : profiles::all_op_kinds)
    if (const std::string problem = choice_problem(op, table[op]); !problem.empty())
      problems.push_back(std::string(profiles::op_kind_name(op)) + ": " + problem);
  // A layer rule's choices run too, on the layers it matches: refused before training, not midway.
  // A batch norm in cuDNN's form sums on the CPU engine (models/batch_norm.cpp: the shipped models'
  // batch norms all follow convolutions, 4-D, so a rule's form is theirs): its kinds are not this
  // backend's, unless an earlier rule may set another form for the same layers.
  bool form_set_before = false;
  for (size_t r = 0; r < table.layer_rules.size(); ++r) {
    const profiles::LayerRule& rule = table.layer_rules[r];
    const bool on_host = rule.batch_norm == profiles::BatchNormForm::cudnn && !form_set_before;
    form_set_before = form_set_before || (rule.batch_norm && rule.batch_norm != profiles::BatchNormForm::cudnn);
    for (profiles::OpKind op : profiles::all_op_kinds) {
      const auto& choice = rule.ops[static_cast<size_t>(op)];
      if (!choice || (on_host && (op == profiles::OpKind::bn_stats || op == profiles::OpKind::bias_grad))) continue;
      if (const std::string problem = choice_problem(op, *choice); !problem.empty())
        problems.push_back(std::string(profiles::op_kind_name(op)) + " in layer rule " + std::to_string(r + 1) + " (" +
                           rule.match.describe() + "): " + problem);
    }
  }
  return problems;
}

std::unique_ptr<ComputeBackend> make_gpu_backend(const profiles::OpTable& table) {
  std::string why;
  if (!gpu::device_available(&why)) throw std::runtime_error(why);
  const auto problems = gpu_unsupported_ops(table);
  if (!problems.empty()) throw std::runtime_error("the GPU kernels cannot run " + problems.front());
  return std::make_unique<GpuBackend>();
}

}  // namespace fplab::models
