// The addition program's kernel (gpu_addition_program.hpp): a thread an output, the value on top
// of its stack in a register and the ones below in local memory; every thread reads the same op
// at the same time (one load for the warp).
#include "sim/cuda/gpu_addition_program.hpp"

#include <algorithm>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gemm_round_trip.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 128;

// Term t of output o: a value of a batch's layout.
struct BatchTerms {
  const float* x;
  size_t term_stride, output_stride;
  __device__ float operator()(size_t o, int32_t t) const {
    return x[static_cast<size_t>(t) * term_stride + o * output_stride];
  }
};

// Term t of output o = (i, j) of a GEMM: the product A[i, t] B[t, j], rounded to fp32.
struct RoundedProducts {
  const float* a;
  const float* b;
  size_t n, k;
  __device__ float operator()(size_t o, int32_t t) const {
    const size_t i = o / n, j = o - i * n;
    return __fmul_rn(a[i * k + static_cast<size_t>(t)], b[static_cast<size_t>(t) * n + j]);
  }
};

template <class Terms>
__global__ void __launch_bounds__(kThreads) run_program(Terms terms, size_t outputs, const int32_t* __restrict__ ops,
                                                        size_t length, float* __restrict__ results) {
  float below[kMaxProgramDepth];
  for (size_t o = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    int held = 0;  // values below the top
    float top = 0.0f;
    for (size_t i = 0; i < length; ++i) {
      const int32_t op = ops[i];
      if (op >= 0) {
        if (i > 0) below[held++] = top;  // the first push has nothing under it
        top = terms(o, op);
      } else if (op == AdditionProgram::kAdd) {
        top = __fadd_rn(below[--held], top);
      } else {
        top = __fadd_rn(top, terms(o, AdditionProgram::kAddTermBase - op));
      }
    }
    results[o] = top;
  }
}

unsigned blocks_for(size_t outputs) {
  return static_cast<unsigned>(std::clamp<size_t>((outputs + kThreads - 1) / kThreads, 1, size_t{1} << 20));
}

}  // namespace

const GpuAdditionProgram::Uploaded& GpuAdditionProgram::program(const Schedule& schedule, size_t n) {
  Uploaded& slot = programs_[{to_string(schedule), n}];
  if (!slot.buffer) {
    const AdditionProgram compiled = addition_program(schedule, n);
    auto buffer = std::make_unique<DeviceBuffer>();
    int32_t* ops = buffer->reserve<int32_t>(compiled.ops.size());
    FPLAB_CUDA(cudaMemcpy(ops, compiled.ops.data(), compiled.ops.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    bytes_ += buffer->bytes();
    slot = {std::move(buffer), ops, compiled.ops.size(), compiled.depth};
  }
  return slot;
}

void GpuAdditionProgram::run(const Schedule& schedule, const float* x, const BatchLayout& layout, float* results) {
  if (layout.outputs == 0) return;
  if (layout.n == 0) {  // the empty sum: +0, as sim::reduce_batch gives
    FPLAB_CUDA(cudaMemsetAsync(results, 0, layout.outputs * sizeof(float)));
    return;
  }
  const auto& st = schedule.stages;
  const bool chains_first = st.size() > 1 && st[0].reduces() && !st[0].format && !st[0].hold &&
                            st[0].reducer.kind == Reducer::Kind::seq && st[0].grouping.kind != Grouping::Kind::all;
  if (chains_first) {
    // A first stage of in-order chains (tpu-v3's strided(128):seq | all:tree over a batch's
    // pixels): its groups' chains in parallel threads, then the rest of the schedule's program
    // over their partials, which is what the walk's next stages see.
    const auto groups = static_cast<size_t>(GpuSeededReduction::group_count(st[0].grouping, layout.n));
    float* const partials = partials_.reserve<float>(groups * layout.outputs);
    chains_.chains(st[0].grouping, x, layout, partials);
    const Uploaded& p = program(Schedule{std::vector<Stage>(st.begin() + 1, st.end())}, groups);
    run_program<<<blocks_for(layout.outputs), kThreads>>>(BatchTerms{partials, layout.outputs, 1}, layout.outputs,
                                                           p.ops, p.length, results);
    FPLAB_CUDA_LAUNCHED("run_program<BatchTerms> over chains");
    return;
  }
  const Uploaded& p = program(schedule, layout.n);
  run_program<<<blocks_for(layout.outputs), kThreads>>>(BatchTerms{x, layout.term_stride, layout.output_stride},
                                                         layout.outputs, p.ops, p.length, results);
  FPLAB_CUDA_LAUNCHED("run_program<BatchTerms>");
}

void GpuAdditionProgram::run_gemm_rounded(const Schedule& schedule, const float* a, const float* b, float* c,
                                          GemmShape shape) {
  const size_t outputs = shape.m * shape.n;
  if (outputs == 0) return;
  if (shape.k == 0) {  // the empty sum: +0
    FPLAB_CUDA(cudaMemsetAsync(c, 0, outputs * sizeof(float)));
    return;
  }
  const Uploaded& p = program(schedule, shape.k);
  run_program<<<blocks_for(outputs), kThreads>>>(RoundedProducts{a, b, shape.n, shape.k}, outputs, p.ops, p.length,
                                                 c);
  FPLAB_CUDA_LAUNCHED("run_program<RoundedProducts>");
}

std::vector<float> reduce_batch_program(const Schedule& schedule, std::span<const float> x, const BatchLayout& layout) {
  DeviceBuffer terms, results;
  float* device_x = terms.reserve<float>(x.size());
  float* device_out = results.reserve<float>(layout.outputs);
  if (!x.empty()) FPLAB_CUDA(cudaMemcpy(device_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  GpuAdditionProgram programs;
  programs.run(schedule, device_x, layout, device_out);
  std::vector<float> out(layout.outputs);
  if (!out.empty()) FPLAB_CUDA(cudaMemcpy(out.data(), device_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

std::vector<float> gemm_rounded_program(const Schedule& schedule, const float* a, const float* b, GemmShape shape) {
  GpuAdditionProgram programs;
  return gemm_round_trip(a, b, shape, [&](const float* pa, const float* pb, float* pc) {
    programs.run_gemm_rounded(schedule, pa, pb, pc, shape);
  });
}

}  // namespace fplab::sim::gpu
