// A deterministic schedule's additions over n terms as a short program that one GPU thread runs
// for each output (gpu_addition_program.hpp): the schedules whose every step is a two-term fp32
// addition — seq, rev, tree, shfl_*, numpy_pairwise, torch_cascade, cub_reduce, and the perm,
// cols, each and body stages around them — which the reduction and GEMM kernels' families do not
// take: numpy's pairwise softmax, tpu-v3's trees, and any such order over rounded products (the
// GEMMs of cpu-seq and tpu-v3). Slower than those kernels (a thread an output), but on the device
// and with the CPU engine's bits. Plain C++ (gpu_plan's library), tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/schedule.hpp"

namespace fplab::sim::gpu {

struct AdditionProgram {
  // In order: op >= 0 pushes term op; op == kAdd replaces the two values on top by their sum;
  // op <= kAddTermBase adds term (kAddTermBase - op) to the value on top (a chain's step).
  std::vector<int32_t> ops;
  int depth = 0;  // the most values held at once (the one on top included)
  size_t terms = 0;

  static constexpr int32_t kAdd = -1, kAddTermBase = -2;
};

// The deepest program the GPU kernel runs (its stack lives in the thread's local memory).
constexpr int kMaxProgramDepth = 64;

// Throws NotRealisable ("schedule 'X' is not realisable by the GPU addition program: why") for a
// schedule that draws from a stream (atomic, shuffle), holds stage formats, adds otherwise than
// two terms at a time (fused, kahan, neumaier, exact, binned) or in an order that depends on the
// output's tile (ring); and for more than 2^30 terms or a depth past kMaxProgramDepth. n >= 1.
AdditionProgram addition_program(const Schedule& schedule, size_t n);

// The same checks without n: "" where addition_program takes the schedule (for any n up to 2^30
// terms: a longer sum is refused when it comes), else the line it would throw.
std::string addition_program_why_not(const Schedule& schedule);

// The program run on the host in float arithmetic (the tests' second reading of it): term(t) gives
// term t.
template <class Term>
float run_addition_program(const AdditionProgram& program, Term&& term) {
  std::vector<float> stack;
  float top = 0.0f;
  for (const int32_t op : program.ops) {
    if (op >= 0) {
      stack.push_back(top);
      top = term(op);
    } else if (op == AdditionProgram::kAdd) {
      top = stack.back() + top;
      stack.pop_back();
    } else {
      top = top + term(AdditionProgram::kAddTermBase - op);
    }
  }
  return top;
}

}  // namespace fplab::sim::gpu
