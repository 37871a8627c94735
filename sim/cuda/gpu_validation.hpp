// The validation matrix of sim/cuda/: every GPU kernel (reduction, batched column sums, GEMM) x
// schedule x shape (K = 1, 31, 33, 1000, 4097, 10^6; nine GEMM shapes) x seeded input (normal,
// log-normal with mixed signs, catastrophic cancellation) against the CPU emulation (sim::reduce,
// sim::reduce_batch, sim::gemm in fp32, round to nearest even, subnormals kept, products fused).
// Deterministic schedules must match bit for bit; atomic ones run `runs` times and their distinct
// results are counted. `fplab validate` prints and writes it; scripts/gpu-check runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fplab::sim::gpu {

// One line of the table: a kernel x schedule x shape, over every input distribution and seed.
struct ValidationRow {
  std::string kernel, schedule, shape;
  bool deterministic = true;
  int inputs = 0;
  int64_t outputs = 0, identical = 0, max_ulps = 0;
  int64_t runs = 0;            // atomic: runs of each input
  int64_t max_distinct = 0;    // atomic: most distinct results of one output over the runs
  int64_t recovered = 0;       // atomic reductions: runs whose atomicAdd chain was recovered exactly
  int64_t ticket_is_fold = 0;  // ... and whose ticket order was the atomicAdd order
  bool pass() const { return !deterministic || identical == outputs; }
};

struct ValidationOptions {
  int runs = 50;                   // runs of each atomic case
  std::function<void()> progress;  // after every row
};

struct ValidationReport {
  std::string device, probe;  // device_info().describe(); the subnormal probe, one line
  std::vector<ValidationRow> rows;
  std::vector<std::string> rejections;  // the one-line refusals of schedules outside the family
  bool ok = false;  // every deterministic output bit-identical, every refusal made, no flush in FADD/FFMA/FMUL
  double seconds = 0;
  nlohmann::json json;  // everything above plus every case
};

// The reduction schedules of the matrix (the sums and GEMM lists live in the .cpp).
const std::vector<std::string>& validated_reductions();

// Needs a CUDA device (device_available()); throws CudaError otherwise.
ValidationReport validate_kernels(const ValidationOptions& options = {});

// The table as printed: device, refusals, one line per row, and a one-line summary last.
std::string validation_table(const ValidationReport& report);

}  // namespace fplab::sim::gpu
