// sim/cuda/ against the CPU emulation: which schedules the GPU kernels realise (checked
// everywhere), and, where a CUDA device is, GPU results == sim::reduce / sim::gemm bit for bit
// for deterministic schedules (fp32, round to nearest even, subnormals kept, products fused).
// Without a device the GPU cases say "SKIPPED: no CUDA device" and pass. sim/cuda/gpu_validate
// runs the full matrix of kernels x schedules x shapes x inputs.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <cuda_runtime.h>

#include "sim/cuda/addition_program.hpp"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/fast_divide.hpp"
#include "sim/cuda/gpu_exact.hpp"
#include "sim/cuda/gpu_addition_program.hpp"
#include "sim/cuda/gpu_batch_norm_cudnn.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "tests/gpu_device_or_skip.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_gemm_probe.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/gpu_reduce.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "fp/cuda_rsqrt.hpp"
#include "sim/channel_dots.hpp"
#include "sim/engine.hpp"
#include "sim/tree_as_shuffle.hpp"
#include "sim/generate.hpp"

using namespace fplab;
using namespace fplab::sim;
using namespace fplab::sim::gpu;

using test::have_device;

namespace {

std::vector<float> floats(const std::string& spec, uint64_t seed) {
  const auto v = generate(spec, seed);
  return {v.begin(), v.end()};
}

float cpu_reduce(const Schedule& s, const std::vector<float>& x) {
  const std::vector<double> d(x.begin(), x.end());
  return static_cast<float>(reduce(s, d, Arithmetic{}));
}

// x (rows x cols, row-major) transposed: each column's terms consecutive.
std::vector<float> transposed_of(const std::vector<float>& x, size_t rows, size_t cols) {
  std::vector<float> t(rows * cols);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
  return t;
}

// Outputs j whose sums read by columns and by rows both have the CPU's bits.
size_t same_both_ways(const std::vector<float>& by_columns, const std::vector<float>& by_rows,
                      const std::vector<double>& cpu) {
  size_t same = 0;
  for (size_t j = 0; j < cpu.size(); ++j)
    same += std::bit_cast<uint32_t>(by_columns[j]) == std::bit_cast<uint32_t>(static_cast<float>(cpu[j])) &&
            std::bit_cast<uint32_t>(by_rows[j]) == std::bit_cast<uint32_t>(static_cast<float>(cpu[j]));
  return same;
}

std::string hex(float x) {
  char text[32];
  std::snprintf(text, sizeof text, "%a", x);
  return text;
}

}  // namespace

TEST_CASE("gpu plan: the GPU presets map onto the reduction kernel") {
  const ReductionPlan naive = plan_reduction(parse_schedule("cuda-naive-sum(256,1024)"));
  CHECK(naive.combine == GridCombine::atomic);
  CHECK_FALSE(naive.deterministic());
  CHECK(naive.first.vector == 1);
  CHECK(naive.first.warps == 8);
  CHECK(naive.first.blocks(1 << 20) == 1024);
  CHECK(naive.first.warp == WarpOrder::shfl_down);
  CHECK(naive.first.block == BlockOrder::seq);

  const ReductionPlan cub = plan_reduction(parse_schedule("cub-sum(256,64)"));
  CHECK(cub.combine == GridCombine::second_pass);
  CHECK(cub.first.warp == WarpOrder::shfl_up);
  CHECK(cub.first.blocks(10) == 64);
  CHECK(cub.second.warps == 8);
  CHECK(cub.second.warp == WarpOrder::shfl_up);

  const ReductionPlan torch = plan_reduction(parse_schedule("torch-sum(512,512)"));
  CHECK(torch.combine == GridCombine::seq);
  CHECK(torch.first.vector == 4);
  CHECK(torch.first.warps == 16);
  CHECK(torch.first.block == BlockOrder::shfl_down);
  CHECK(torch.first.blocks(1) == 512);

  const ReductionPlan one = plan_reduction(parse_schedule("strided(1024):seq | contig(32):shfl_xor | all:shfl_xor"));
  CHECK(one.combine == GridCombine::single_block);
  CHECK(one.first.warps == 32);
  CHECK(one.first.block == BlockOrder::shfl_xor);

  const ReductionPlan warps = plan_reduction(parse_schedule("strided(4096):seq | contig(32):shfl_down | all:seq"));
  CHECK(warps.combine == GridCombine::seq);  // 128 blocks of one warp, folded in order
  CHECK(warps.first.warps == 1);

  const ReductionPlan runs =
      plan_reduction(parse_schedule("contig(64):seq | contig(32):shfl_down | contig(8):seq | all:seq"));
  CHECK(runs.first.contiguous);
  CHECK(runs.first.blocks(1000000) == 62);  // ceil(ceil(10^6 / 64) / 256)
}

TEST_CASE("gpu plan: the training profiles' sums map onto one-block passes (warp seq, one warp, one thread)") {
  // h100's deterministic bias gradient: TF's column reduce (32 lanes folded in order, then warps).
  const ReductionPlan column = plan_reduction(parse_schedule("strided(1024):seq | contig(32):seq | all:shfl_up"));
  CHECK(column.combine == GridCombine::single_block);
  CHECK(column.first.warp == WarpOrder::seq);
  CHECK(column.first.warps == 32);
  CHECK(column.first.block == BlockOrder::shfl_up);
  // Softmax denominators: one warp, an all: stage over its 32 lanes.
  const ReductionPlan warp = plan_reduction(parse_schedule("strided(32):seq | all:shfl_up"));
  CHECK(warp.combine == GridCombine::single_block);
  CHECK(warp.first.warps == 1);
  CHECK(warp.first.warp == WarpOrder::shfl_up);
  CHECK(warp.first.blocks(10) == 1);
  CHECK(plan_reduction(parse_schedule("strided(128):seq | contig(4):seq | all:seq")).first.warp == WarpOrder::seq);
  // A left fold: one thread.
  const ReductionPlan fold = plan_reduction(parse_schedule("seq"));
  CHECK(fold.combine == GridCombine::single_block);
  CHECK(fold.first.contiguous);
  CHECK(fold.first.chunk == 0);
  CHECK(fold.first.blocks(1000000) == 1);
  // A second pass of one warp (CUB's shape with a 32-thread second block).
  CHECK(plan_reduction(parse_schedule("strided(8192):seq | contig(32):shfl_down | contig(8):seq | strided(32):seq | "
                                      "all:shfl_down"))
            .combine == GridCombine::second_pass);
  // PyTorch's reductions over a strided dimension (h100-torch's bias gradients): accumulators a
  // stride apart (interleaved), one warp of 4 or 32 threads, or 16 warps.
  const ReductionPlan few = plan_reduction(parse_schedule("strided(16):seq | strided(4):seq | all:shfl_down"));
  CHECK(few.combine == GridCombine::single_block);
  CHECK(few.first.interleaved);
  CHECK(few.first.vector == 4);
  CHECK(few.first.grid_threads == 4);
  CHECK(few.first.blocks(64) == 1);
  const ReductionPlan warps16 = plan_reduction(
      parse_schedule("strided(2048):seq | strided(512):seq | contig(32):shfl_down | all:shfl_down"));
  CHECK(warps16.combine == GridCombine::single_block);
  CHECK(warps16.first.interleaved);
  CHECK(warps16.first.warps == 16);
  CHECK(warps16.first.block == BlockOrder::shfl_down);
  CHECK(plan_reduction(parse_schedule("strided(128):seq | strided(32):seq | all:shfl_down")).first.warps == 1);
  CHECK(!plan_reduction(parse_schedule("strided(128):seq | contig(4):seq | all:seq")).first.interleaved);
  CHECK(plan_reduction(parse_schedule("strided(16):seq | strided(4):seq | all:shfl_up")).first.grid_threads == 4);
  // Three accumulators a thread are not realised.
  CHECK_THROWS_AS(plan_reduction(parse_schedule("strided(96):seq | strided(32):seq | all:shfl_down")), NotRealisable);
  // Still out: an all: stage over more than one warp's partials with no warp stage before it.
  CHECK_THROWS_AS(plan_reduction(parse_schedule("strided(64):seq | all:shfl_up")), NotRealisable);
  CHECK_THROWS_AS(plan_reduction(parse_schedule("all:shfl_down")), NotRealisable);
}

TEST_CASE("gpu plan: split-K presets map onto the GEMM kernel") {
  CHECK(plan_gemm(parse_schedule("seq")).part_count(1000) == 1);
  const GemmPlan split = plan_gemm(parse_schedule("splitk(4)"));
  CHECK(split.chunk(1001) == 251);
  CHECK(split.part_count(1001) == 4);
  CHECK(split.part_count(3) == 3);  // parts of ceil(3/4) = 1: three of them
  CHECK(plan_gemm(parse_schedule("splitk-tree(4)")).combine == GemmPlan::Combine::tree);
  CHECK_FALSE(plan_gemm(parse_schedule("splitk-atomic(4)")).deterministic());
  CHECK(plan_gemm(parse_schedule("systolic(128)")).part_count(4097) == 33);
}

TEST_CASE("gpu plan: each(R)[contig(G):seq] | all:R maps onto the GEMM kernel's parts, as the grammar cuts them") {
  const GemmPlan tiles = plan_gemm(parse_schedule("each(784)[contig(512):seq] | all:atomic"));
  CHECK(tiles.run == 784);
  CHECK(tiles.size == 512);
  CHECK_FALSE(tiles.deterministic());
  CHECK(plan_gemm(parse_schedule("each(6)[all:seq] | all:seq")).size == 6);    // all: one part a run
  CHECK(plan_gemm(parse_schedule("each(6)[contig(9):seq] | all:tree")).size == 6);  // a part no longer than its run
  // Every part's bounds against the grammar's own cutting (runs of R, groups of G from each run's start).
  for (const auto& [run, group] : {std::pair<int64_t, int64_t>{784, 512}, {7, 3}, {8, 4}, {5, 5}, {12, 1}, {6, 9}})
    for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{13}, int64_t{784}, int64_t{2 * 784 + 300}, int64_t{100}}) {
      const KParts ks = plan_gemm(parse_schedule("each(" + std::to_string(run) + ")[contig(" + std::to_string(group) +
                                                 "):seq] | all:seq"))
                            .k_parts(k);
      std::vector<std::pair<int64_t, int64_t>> expected;
      for (int64_t from = 0; from < k; from += run)
        for (int64_t g = from; g < std::min(k, from + run); g += group)
          expected.emplace_back(g, std::min({g + group, from + run, k}));
      std::vector<std::pair<int64_t, int64_t>> got;
      for (int64_t z = 0; z < ks.count(k); ++z) got.emplace_back(ks.begin(z), ks.end(z, k));
      INFO("each(" << run << ")[contig(" << group << ")] over " << k);
      CHECK(got == expected);
    }
}

TEST_CASE("gpu plan: strided(P):seq | all:R maps onto runs of the operands gathered part by part") {
  const GemmPlan taps = plan_gemm(parse_schedule("strided(9):seq | all:atomic"));
  CHECK(taps.parts == GemmPlan::Parts::strided);
  CHECK_FALSE(taps.deterministic());
  // Gathered in k_order, the parts' runs hold the grammar's strided groups: part j the terms
  // j, j + P, ... in that order (fewer terms than parts: one a part, nothing gathered).
  for (int64_t parts : {int64_t{9}, int64_t{4}, int64_t{7}, int64_t{1}})
    for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{9}, int64_t{13}, int64_t{100}, int64_t{2304}, int64_t{2305}}) {
      const GemmPlan plan = plan_gemm(parse_schedule("strided(" + std::to_string(parts) + "):seq | all:seq"));
      std::vector<size_t> order = plan.k_order(k);
      if (order.empty())
        for (int64_t t = 0; t < k; ++t) order.push_back(static_cast<size_t>(t));
      REQUIRE(order.size() == static_cast<size_t>(k));
      std::vector<std::vector<size_t>> expected;
      for (int64_t j = 0; j < std::min(parts, k); ++j) {
        expected.emplace_back();
        for (int64_t t = j; t < k; t += parts) expected.back().push_back(static_cast<size_t>(t));
      }
      const KParts ks = plan.k_parts(k);
      std::vector<std::vector<size_t>> got;
      for (int64_t z = 0; z < ks.count(k); ++z)
        got.emplace_back(order.begin() + ks.begin(z), order.begin() + ks.end(z, k));
      INFO("strided(" << parts << ") over " << k);
      CHECK(got == expected);
    }
}

TEST_CASE("gpu plan: deal(P,B)[...] hands map onto runs of the operands gathered hand by hand") {
  // Gathered in k_order, the parts' runs hold the grammar's hands: hand j the blocks j, j + P, ...
  // of B terms, in order (a last, shorter block; fewer blocks than hands; one block: nothing gathered).
  for (const auto& [hands, block] : {std::pair<int64_t, int64_t>{90, 64}, {4, 8}, {3, 5}, {7, 1}, {1, 16}})
    for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{13}, int64_t{100}, int64_t{6272}, int64_t{12544},
                      int64_t{12545}, int64_t{64 * 91 + 7}}) {
      const std::string text =
          "deal(" + std::to_string(hands) + "," + std::to_string(block) + ")[all:fused(tc-h100-tf32)] | all:seq";
      const GemmPlan plan = plan_tensor_core_gemm(parse_schedule(text)).parts;
      std::vector<size_t> order = plan.k_order(k);
      if (order.empty())
        for (int64_t t = 0; t < k; ++t) order.push_back(static_cast<size_t>(t));
      REQUIRE(order.size() == static_cast<size_t>(k));
      std::vector<std::vector<size_t>> expected(static_cast<size_t>(std::min(hands, (k + block - 1) / block)));
      for (int64_t t = 0; t < k; ++t)
        expected[static_cast<size_t>(t / block % hands)].push_back(static_cast<size_t>(t));
      const KParts ks = plan.k_parts(k);
      std::vector<std::vector<size_t>> got;
      for (int64_t z = 0; z < ks.count(k); ++z)
        got.emplace_back(order.begin() + ks.begin(z), order.begin() + ks.end(z, k));
      INFO(text << " over " << k);
      CHECK(got == expected);
    }
}

TEST_CASE("gpu plan: a first stage that only reorders K is gathered, the rest on a kernel; deterministic only") {
  const OrderedGemmRoute tf32 = plan_ordered_gemm(parse_schedule("each(288)[cols(9)] | all:fused(8,25,tf32rne)"));
  REQUIRE(tf32.order);
  CHECK(std::holds_alternative<TensorCoreGemmPlan>(tf32.rest));
  const std::vector<size_t> order = tf32.k_order(576);
  REQUIRE(order.size() == 576);
  CHECK(order[0] == 0);
  CHECK(order[1] == 9);     // channel 1, kernel position 0
  CHECK(order[32] == 1);    // channel 0, kernel position 1
  CHECK(order[288] == 288);  // the second block of 32 channels
  const OrderedGemmRoute reversed =
      plan_ordered_gemm(parse_schedule("each(18)[perm(8,7,6,5,4,3,2,1,0) | cols(9)] | contig(4):seq | all:seq"));
  REQUIRE(reversed.order);
  CHECK(std::get<GemmPlan>(reversed.rest).parts == GemmPlan::Parts::contig);
  CHECK(reversed.k_order(18)[0] == 8);  // channel 0, the last kernel position first
  CHECK_FALSE(plan_ordered_gemm(parse_schedule("split(4):seq | all:seq")).order);
  // an atomic step after a reordering: its stream is keyed by stage numbers the rest would not keep
  for (const char* text : {"cols(9) | contig(4):seq | all:atomic", "cols(9) | all:kahan"}) {
    const Schedule s = parse_schedule(text);
    try {
      (void)plan_ordered_gemm(s);
      FAIL("accepted: " << text);
    } catch (const NotRealisable& e) {
      const std::string message = e.what();
      CHECK(message.rfind("schedule '" + to_string(s) + "' is not realisable", 0) == 0);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("gpu plan: schedules outside the family are rejected with one line naming them") {
  const char* reductions[] = {"pairwise",
                              "numpy",
                              "atomic",
                              "kahan",
                              "shuffle | all:seq",
                              "nccl-ring(8)",
                              "contig(4):seq | all:seq",
                              "strided(100):seq | contig(32):shfl_down | all:seq",
                              "strided(256):rev | contig(32):shfl_down | all:seq",
                              "strided(256):seq | contig(16):shfl_down | all:seq",
                              "strided(4096):seq | contig(3):seq | contig(32):shfl_down | all:seq",
                              "strided(262144):seq | contig(32):shfl_down | contig(64):seq | all:seq",
                              "strided(65536):seq | contig(32):shfl_down | all:shfl_down",
                              "strided(262144):seq | contig(32):shfl_down | contig(8):seq | all:tree",
                              "strided(256):seq | contig(32):shfl_down | contig(8):seq | all:seq | all:seq"};
  for (const char* text : reductions) {
    const Schedule s = parse_schedule(text);
    const std::string expected = "schedule '" + to_string(s) + "' is not realisable by the GPU reduction kernel";
    try {
      (void)plan_reduction(s);
      FAIL("accepted: " << text);
    } catch (const NotRealisable& e) {
      const std::string message = e.what();
      CHECK(message.rfind(expected, 0) == 0);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  for (const char* text : {"pairwise", "strided(4):tree | all:seq", "split(4):kahan | all:seq", "split(4):seq | all:rev",
                           "tc-h100-tf32", "cuda-naive-sum(256,4)", "each(8)[contig(4):tree] | all:seq",
                           "each(8)[contig(4):seq | all:seq] | all:seq", "each(8)[contig(4):seq] | contig(2):seq | all:seq"}) {
    const Schedule s = parse_schedule(text);
    try {
      (void)plan_gemm(s);
      FAIL("accepted: " << text);
    } catch (const NotRealisable& e) {
      CHECK(std::string(e.what()).rfind("schedule '" + to_string(s) + "' is not realisable by the GPU GEMM kernel",
                                        0) == 0);
    }
  }
}

TEST_CASE("FastDivide == integer division: every divisor to 4096, edge and random numerators, large divisors") {
  // Runs on the host (the same code the kernels run); the quotient and remainder of every pair.
  std::mt19937_64 rng(7);
  const auto check = [](uint32_t d, uint32_t n) {
    const FastDivide f(d);
    return f.quotient(n) == n / d && f.remainder(n) == n % d;
  };
  size_t wrong = 0;
  for (uint32_t d = 1; d <= 4096; ++d) {
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu})
      wrong += !check(d, n);
    for (int t = 0; t < 64; ++t) wrong += !check(d, static_cast<uint32_t>(rng()));
  }
  for (int t = 0; t < 200000; ++t) {
    const auto d = static_cast<uint32_t>(rng() % 0x80000000u) + 1, n = static_cast<uint32_t>(rng());
    wrong += !check(d, n) + !check(d, n % (2 * d)) + !check(d, n / d * d);
  }
  CHECK(wrong == 0);
}

TEST_CASE("gpu device: fp32 arithmetic keeps subnormals (no FTZ)") {
  if (!have_device()) return;
  INFO(device_info().describe());
  const SubnormalProbe p = probe_subnormals();
  CHECK(p.add);
  CHECK(p.fma);
  CHECK(p.mul);
  CHECK(p.shuffle);
  // atomicAdd's fp32 behaviour is measured and documented (docs/gpu.md), not assumed.
  WARN("atomicAdd keeps subnormal inputs: " << p.atomic_input << ", results: " << p.atomic_result);
}

TEST_CASE("gpu reduce == sim::reduce bit for bit: deterministic schedules x K in {1, 31, 33, 4097, 6001, 100000}") {
  if (!have_device()) return;
  const char* schedules[] = {
      "strided(262144):seq | contig(32):shfl_down | contig(8):seq | all:seq",
      "strided(8192):seq | contig(32):shfl_up | contig(4):shfl_up | all:seq",
      "strided(33792):seq | contig(32):shfl_xor | contig(32):shfl_xor | all:seq",
      "torch-sum(512,512)",
      "cub-sum(256,64)",
      "strided(1024):seq | contig(32):shfl_down | all:shfl_down",
      "contig(64):seq | contig(32):shfl_down | contig(8):seq | all:seq",
      "strided(16384):seq | contig(8):seq | contig(32):shfl_down | contig(2):seq | all:seq",
      "strided(4096):seq | contig(2):seq | contig(32):shfl_up | contig(1):seq | all:seq",
      "strided(4096):seq | contig(32):shfl_down | all:seq",
      "seq",
      "strided(1024):seq | contig(32):seq | all:shfl_up",
      "strided(256):seq | contig(32):seq | contig(8):seq | all:seq",
      "strided(32):seq | all:shfl_up",
      "strided(128):seq | contig(4):seq | all:shfl_xor",
      "cub-sum(256,1)",
      // K <= 4096: one thread's chain whose block partial a second pass reads (serial_pass, store)
      "contig(4096):seq | contig(32):shfl_down | strided(32):seq | all:shfl_down",
      // interleaved accumulators (PyTorch's sums over a strided dimension), and fewer than 32 threads
      "strided(16):seq | strided(4):seq | all:shfl_down",
      "strided(128):seq | strided(32):seq | all:shfl_down",
      "strided(2048):seq | strided(512):seq | contig(32):shfl_down | all:shfl_down",
      "strided(65536):seq | strided(8192):seq | contig(32):shfl_xor | contig(8):seq | all:seq",
      "strided(4):seq | all:seq",
      "strided(16):seq | contig(2):seq | all:shfl_xor",
      "strided(40):seq | strided(5):seq | all:shfl_up",
      "strided(12):seq | all:shfl_up",
  };
  // 4097 and more: a strided pass of at most 32 threads stages its terms (staged_pass); 6001 ends
  // in a part-filled window whatever the round V·P
  for (const char* text : schedules)
    for (size_t k : {1, 31, 33, 4097, 6001, 100000})
      for (const char* dist : {"normal", "cancel"}) {
        const Schedule s = parse_schedule(text);
        const auto x = floats(std::string(dist) + ":" + std::to_string(k), k);
        const float gpu = gpu::reduce(s, x), cpu = cpu_reduce(s, x);
        INFO(text << ", K=" << k << ", " << dist << ": gpu " << hex(gpu) << ", cpu " << hex(cpu));
        CHECK(std::bit_cast<uint32_t>(gpu) == std::bit_cast<uint32_t>(cpu));
      }
}

TEST_CASE("gpu reduce, all:atomic: the atomicAdd chain is fp32 additions of the ordered pass's block partials") {
  if (!have_device()) return;
  const auto x = floats("lognormal:100000", 3);
  const Schedule atomic = parse_schedule("cuda-naive-sum(128,64)");
  const Schedule ordered = parse_schedule("strided(8192):seq | contig(32):shfl_down | contig(4):seq | all:seq");
  GpuReduction gpu(x);
  const RecordedRun reference = gpu.run_recorded(plan_reduction(ordered));
  REQUIRE(reference.result == cpu_reduce(ordered, x));
  for (int r = 0; r < 20; ++r) {
    const RecordedRun run = gpu.run_recorded(plan_reduction(atomic));
    CHECK(run.partials == reference.partials);
    REQUIRE(run.fold_order.size() == 64);  // recovered
    float sum = -0.0f;
    for (int32_t b : run.fold_order) sum += run.partials[static_cast<size_t>(b)];
    CHECK(std::bit_cast<uint32_t>(sum) == std::bit_cast<uint32_t>(run.result));
  }
}

TEST_CASE("gpu gemm == sim::gemm bit for bit: FMA chains and ordered split-K on awkward shapes") {
  if (!have_device()) return;
  const GemmShape shapes[] = {{1, 1, 1}, {7, 13, 33}, {33, 65, 1000}, {65, 3, 4097}, {70, 130, 17}};
  for (const char* text :
       {"seq", "splitk(4)", "splitk(7)", "splitk-tree(5)", "splitk-tree(16)", "splitk-tree(40)", "systolic(128)",
        // one chain per kernel position (cuDNN's input gradient at 8x8): operands gathered part by part
        "strided(9):seq | all:seq", "strided(4):seq | all:tree", "strided(33):seq | all:seq"})
    for (const auto& shape : shapes) {
      const Schedule s = parse_schedule(text);
      const auto a = floats("normal:" + std::to_string(shape.m * shape.k), shape.k);
      const auto b = floats("lognormal:" + std::to_string(shape.k * shape.n), shape.k + 1);
      std::vector<float> gpu(shape.m * shape.n), cpu(shape.m * shape.n);
      gpu::gemm(s, a.data(), b.data(), gpu.data(), shape);
      sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{});
      size_t same = 0;
      for (size_t i = 0; i < gpu.size(); ++i)
        same += std::bit_cast<uint32_t>(gpu[i]) == std::bit_cast<uint32_t>(cpu[i]);
      INFO(text << ", " << shape.m << "x" << shape.n << "x" << shape.k);
      CHECK(same == gpu.size());
    }
}

TEST_CASE("gpu gemm, products rounded (cpu-seq, tpu-v3) == sim::gemm bit for bit: every tile and combine") {
  if (!have_device()) return;
  Arithmetic rounded;
  rounded.products = Products::rounded;
  // tiles by shape: 64 x 64 (k not a multiple of 4), thin 16 x 32, wide 128 x 64 and 128 x 128
  const GemmShape shapes[] = {{1, 1, 1}, {7, 13, 33}, {64, 64, 4096}, {576, 64, 2048}, {2048, 256, 64}, {70, 130, 17}};
  const NoiseKey key{3, 17, 5};
  for (const char* text : {"all:seq", "systolic(128)", "splitk-tree(5)", "split(7):seq | all:atomic",
                           "strided(9):seq | all:seq"})
    for (const auto& shape : shapes) {
      const Schedule s = parse_schedule(text);
      const auto a = floats("normal:" + std::to_string(shape.m * shape.k), shape.k);
      const auto b = floats("lognormal:" + std::to_string(shape.k * shape.n), shape.k + 1);
      std::vector<float> gpu(shape.m * shape.n), cpu(shape.m * shape.n), fused(shape.m * shape.n);
      if (plan_gemm(s).deterministic())
        gpu::gemm(s, a.data(), b.data(), gpu.data(), shape, true);
      else
        gemm_seeded(s, a.data(), b.data(), gpu.data(), shape, key, true);
      sim::gemm(s, a.data(), b.data(), cpu.data(), shape, rounded, key);
      sim::gemm(s, a.data(), b.data(), fused.data(), shape, Arithmetic{}, key);
      size_t same = 0;
      for (size_t i = 0; i < gpu.size(); ++i)
        same += std::bit_cast<uint32_t>(gpu[i]) == std::bit_cast<uint32_t>(cpu[i]);
      INFO(text << ", " << shape.m << "x" << shape.n << "x" << shape.k);
      CHECK(same == gpu.size());
      if (shape.k > 16) CHECK(cpu != fused);  // rounding the products changes the bits
    }
}

TEST_CASE("gpu gemm, ordered split-K on grids larger than the device (two passes, serial) == sim::gemm") {
  if (!have_device()) return;
  const GemmShape shape{520, 1030, 2000};  // 153 output tiles: x 7 or 16 parts > the blocks resident at once
  INFO("resident GEMM blocks: " << GpuGemm::resident_blocks());
  REQUIRE(153 * 7 > GpuGemm::resident_blocks());
  const auto a = floats("normal:" + std::to_string(shape.m * shape.k), 11);
  const auto b = floats("lognormal:" + std::to_string(shape.k * shape.n), 12);
  GpuGemm gpu(a.data(), b.data(), shape);
  // splitk(7): parts of 286 >= 256 terms, workspace and a second kernel; split(16): parts of 125,
  // each part adds itself into C in turn (the small shapes above take the "last folds" form).
  for (const char* text : {"splitk(7)", "split(16):seq | all:seq", "systolic(128)"}) {
    const Schedule s = parse_schedule(text);
    std::vector<float> out(shape.m * shape.n), cpu(shape.m * shape.n);
    sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{});
    for (int run = 0; run < 3; ++run) {  // the flags are reset for the next launch
      std::fill(out.begin(), out.end(), std::nanf(""));
      gpu.run(plan_gemm(s), out.data());
      size_t same = 0;
      for (size_t i = 0; i < out.size(); ++i)
        same += std::bit_cast<uint32_t>(out[i]) == std::bit_cast<uint32_t>(cpu[i]);
      INFO(text << ", run " << run);
      CHECK(same == out.size());
    }
  }
}

TEST_CASE("gpu gemm: every ordered split-K form, forced, == sim::gemm on every shape regime") {
  if (!have_device()) return;
  using Form = GpuGemm::OrderedForm;
  // Few tiles (all parts resident), more tiles than SMs, a grid larger than the chip; parts of
  // K both shorter and longer than 256, a last part shorter than the others, a one-term part.
  const GemmShape shapes[] = {{9, 16, 3001}, {520, 1030, 2000}, {130, 70, 255}, {64, 64, 17}};
  for (const auto& shape : shapes)
    for (const char* text : {"splitk(7)", "split(16):seq | all:seq", "systolic(128)", "split(17):seq | all:seq",
                             // parts that restart every 300 terms: 128, 128, 44, 128, ...; a part longer than its run
                             "each(300)[contig(128):seq] | all:seq", "each(20)[contig(64):seq] | all:seq"}) {
      const Schedule s = parse_schedule(text);
      const auto a = floats("normal:" + std::to_string(shape.m * shape.k), shape.m + 21);
      const auto b = floats("lognormal:" + std::to_string(shape.k * shape.n), shape.n + 22);
      std::vector<float> out(shape.m * shape.n), cpu(shape.m * shape.n);
      sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{});
      GpuGemm gpu(a.data(), b.data(), shape);
      for (Form form : {Form::last_folds, Form::two_passes, Form::serial, Form::by_shape}) {
        GpuGemmProbe::force_ordered_form(gpu, form);
        for (int run = 0; run < 2; ++run) {  // tickets and flags are reset for the next launch
          std::fill(out.begin(), out.end(), std::nanf(""));
          gpu.run(plan_gemm(s), out.data());
          size_t same = 0;
          for (size_t i = 0; i < out.size(); ++i)
            same += std::bit_cast<uint32_t>(out[i]) == std::bit_cast<uint32_t>(cpu[i]);
          INFO(text << ", " << shape.m << "x" << shape.n << "x" << shape.k << ", " << GpuGemm::form_name(form)
                    << ", run " << run);
          CHECK(same == out.size());
        }
      }
    }
}

TEST_CASE("gpu gemm: every output tile, forced, == sim::gemm (ragged edges, short parts, signed zeros)") {
  if (!have_device()) return;
  using detail::ChainTile;
  // n and k multiples of 4 (the tiled kernels' float4 loads) with m, n off the tiles; some K not
  // a multiple of the wide kernel's 8 or the thin ones' 64 and 32, parts of K a multiple of 4 or not
  // (then the 64 x 64 kernel runs).
  // {20, 36, 2052}: a thin GEMM (few outputs, K past many of the thin tiles' stages); {40, 68, 1032}
  // in 32 x 64 tiles: two rows and two columns of them, the last ones mostly empty;
  // {20, 36, 2064}: split(4) parts of 516 terms, a multiple of 4 that ends inside a stage, so that
  // split-K and the atomic combine run in the tiled kernels too.
  const GemmShape shapes[] = {{300, 260, 1000}, {129, 132, 12}, {1, 64, 8},     {257, 68, 36},
                              {130, 100, 1004}, {20, 36, 2052}, {20, 36, 2064}, {40, 68, 1032}};
  for (const auto& shape : shapes)
    for (const char* text : {"seq", "split(10):seq | all:seq", "splitk-tree(5)", "split(4):seq | all:seq",
                             "split(4):seq | all:atomic", "each(516)[contig(256):seq] | all:seq",
                             "each(20)[contig(8):seq] | all:tree", "each(6)[contig(4):seq] | all:tree",
                             "each(20)[all:seq] | all:atomic"}) {
      const Schedule s = parse_schedule(text);
      const bool atomic = std::string(text).find("atomic") != std::string::npos;
      // Atomic combines add in the hardware's order: integers keep every order's sum exact.
      auto a = floats("normal:" + std::to_string(shape.m * shape.k), shape.m + 31);
      auto b = floats("lognormal:" + std::to_string(shape.k * shape.n), shape.n + 32);
      if (atomic)
        for (auto* v : {&a, &b})
          for (float& x : *v) x = std::round(4 * x);
      // Row 0 of A zeros, column 0 of B negative, column 1 positive: outputs (0, 0) and (0, 1) are
      // sums of -0 and of +0 products, -0 and +0 (a chain started anywhere else would give +0).
      for (size_t t = 0; t < shape.k; ++t) {
        a[t] = 0.0f;
        b[t * shape.n] = -std::fabs(b[t * shape.n]) - 1.0f;
        if (shape.n > 1) b[t * shape.n + 1] = std::fabs(b[t * shape.n + 1]) + 1.0f;
      }
      std::vector<float> out(shape.m * shape.n), cpu(shape.m * shape.n);
      sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{});
      GpuGemm gpu(a.data(), b.data(), shape);
      GpuGemmProbe::force_ordered_form(gpu, GpuGemm::OrderedForm::two_passes);  // parts written out
      for (ChainTile tile :
           {ChainTile::none, ChainTile::t128x128, ChainTile::t128x64, ChainTile::t16x32, ChainTile::t32x64}) {
        GpuGemmProbe::force_tile(gpu, tile);
        std::fill(out.begin(), out.end(), std::nanf(""));
        gpu.run(plan_gemm(s), out.data());
        size_t same = 0;
        for (size_t i = 0; i < out.size(); ++i)
          same += std::bit_cast<uint32_t>(out[i]) == std::bit_cast<uint32_t>(cpu[i]);
        INFO(text << ", " << shape.m << "x" << shape.n << "x" << shape.k << ", tile " << detail::chain_tile_name(tile));
        CHECK(same == out.size());
        CHECK(std::signbit(out[0]));
      }
    }
}

TEST_CASE("gpu gemm, a batch of GEMMs (run_batched_on_device) == sim::gemm of each, bit for bit") {
  if (!have_device()) return;
  // One launch of the thin kernel where the plan is one chain an output and the shape takes the
  // 16 x 32 tile (a Winograd weight gradient's six GEMMs of a row: a ResNet-18's 64 x 64 over
  // 8192 terms; 40 x 36 in 3 x 2 tiles; K past many stages); else one GEMM at a time (n not a
  // multiple of 4, split-K parts, parts that restart).
  struct Case {
    const char* schedule;
    GemmShape shape;
    size_t batches;
  };
  for (const Case& c : {Case{"seq", {64, 64, 8192}, 6}, Case{"seq", {40, 36, 36}, 6}, Case{"seq", {20, 36, 2052}, 3},
                        Case{"seq", {33, 30, 100}, 4}, Case{"split(4):seq | all:seq", {64, 64, 1024}, 6},
                        Case{"each(516)[contig(256):seq] | all:seq", {20, 36, 2064}, 2}}) {
    const Schedule s = parse_schedule(c.schedule);
    const auto [m, n, k] = c.shape;
    auto a = floats("normal:" + std::to_string(c.batches * m * k), m + k);
    auto b = floats("lognormal:" + std::to_string(c.batches * k * n), n + k);
    // Entry 1: row 0 of A zeros, column 0 of B negative: output (0, 0) the sum of -0 products, -0.
    for (size_t t = 0; t < k; ++t) {
      a[m * k + t] = 0.0f;
      b[k * n + t * n] = -std::fabs(b[k * n + t * n]) - 1.0f;
    }
    std::vector<float> have(c.batches * m * n, std::nanf("")), want(c.batches * m * n);
    gemm_batched(s, a.data(), b.data(), have.data(), c.shape, c.batches);
    for (size_t z = 0; z < c.batches; ++z)
      sim::gemm(s, &a[z * m * k], &b[z * k * n], &want[z * m * n], c.shape, Arithmetic{});
    size_t same = 0;
    for (size_t i = 0; i < have.size(); ++i)
      same += std::bit_cast<uint32_t>(have[i]) == std::bit_cast<uint32_t>(want[i]);
    INFO(c.schedule << ", " << c.batches << " x " << m << "x" << n << "x" << k);
    CHECK(same == have.size());
    CHECK(std::signbit(have[m * n]));
  }
}

TEST_CASE("gpu segmented sums == sim::reduce_batch bit for bit: training's sums over the batch axis") {
  if (!have_device()) return;
  // The deterministic sums of the shipped profiles and presets that the kernels realise.
  const char* schedules[] = {"seq",
                             "strided(1024):seq | contig(32):seq | all:shfl_up",
                             "strided(32):seq | all:shfl_up",
                             "cub-sum(256,1)",
                             "cub-sum(256,1056)",
                             "strided(256):seq | contig(32):shfl_down | all:seq",
                             "torch-sum(512,512)",
                             "contig(8):seq | contig(32):shfl_down | all:seq",
                             // h100-torch's bias gradients (PyTorch's column and image sums)
                             "strided(16):seq | strided(4):seq | all:shfl_down",
                             "strided(4):seq | all:seq",
                             "strided(128):seq | strided(32):seq | all:shfl_down",
                             "strided(2048):seq | strided(512):seq | contig(32):shfl_down | all:shfl_down"};
  const std::pair<size_t, size_t> shapes[] = {{1, 1}, {10, 64}, {64, 10}, {64, 128}, {33, 7}, {1000, 3}, {50176, 16}};
  GpuSegmentedReduction gpu;  // one object throughout: buffers grow and are reused
  for (const char* text : schedules)
    for (const auto& [rows, cols] : shapes) {
      const Schedule s = parse_schedule(text);
      const auto x = floats("lognormal:" + std::to_string(rows * cols), rows + cols);
      const std::vector<double> terms(x.begin(), x.end());
      std::vector<double> cpu(cols);
      reduce_batch(s, terms.data(), rows, cols, Arithmetic{}, NoiseKey{}, cpu.data());
      std::vector<float> by_columns(cols, 1.0f), by_rows(cols, 1.0f);
      gpu.run_columns(plan_reduction(s), x.data(), rows, cols, by_columns.data());
      const std::vector<float> transposed = transposed_of(x, rows, cols);
      gpu.run(plan_reduction(s), transposed.data(), rows, cols, by_rows.data());
      INFO(text << ", " << rows << " rows x " << cols << " columns");
      CHECK(same_both_ways(by_columns, by_rows, cpu) == cols);
    }
}

TEST_CASE("gpu BatchNorm's sums read from its planes == sim::reduce_batch of the segments, bit for bit") {
  if (!have_device()) return;
  // Strided folds read x (batch, channels, positions) in place (run_planes_in_place: term b·P + p
  // of channel c at x[b, c, p]); contiguous and interleaved folds, vector loads that a plane's
  // length would split and one warp's long sums decline (the caller lays out segments then).
  const char* schedules[] = {"cub-sum(256,1056)",
                             "cub-sum(256,1)",
                             "strided(32):seq | all:shfl_up",
                             "strided(1024):seq | contig(32):seq | all:shfl_up",
                             "strided(256):seq | contig(32):shfl_down | all:seq",
                             "seq",
                             "contig(8):seq | contig(32):shfl_down | all:seq"};
  struct Shape {
    size_t batch, channels, positions;
  };
  const Shape shapes[] = {{1, 2, 4}, {5, 3, 6}, {64, 16, 16}, {3, 7, 100}, {32, 8, 1024}, {128, 5, 49}};
  GpuSegmentedReduction gpu;
  DeviceBuffer x_device, results_device;
  size_t ran = 0, declined = 0;
  for (const char* text : schedules)
    for (const Shape& shape : shapes) {
      const Schedule s = parse_schedule(text);
      const ReductionPlan plan = plan_reduction(s);
      const size_t c = shape.channels, p = shape.positions, n = shape.batch * p;
      const auto x = floats("normal:" + std::to_string(n * c), n + c);
      float* const x_d = x_device.reserve<float>(x.size());
      float* const sums_d = results_device.reserve<float>(2 * c);
      REQUIRE(cudaMemcpy(x_d, x.data(), x.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
      INFO(text << ", " << shape.batch << " x " << c << " x " << p);
      if (!gpu.run_planes_in_place(plan, x_d, shape.batch, c, p, nullptr, sums_d)) {
        ++declined;
        // (one warp's sum of 4096 terms or more: gpu_reduce.cu's staged pass, which reads segments)
        const bool staged =
            plan.first.grid_threads <= 32 && plan.first.blocks(static_cast<int64_t>(n)) == 1 && n >= 4096;
        CHECK((plan.first.contiguous || plan.first.interleaved || p % plan.first.vector != 0 || staged));
        continue;
      }
      REQUIRE(gpu.run_planes_in_place(plan, x_d, shape.batch, c, p, sums_d, sums_d + c));
      std::vector<float> have(2 * c);
      REQUIRE(cudaMemcpy(have.data(), sums_d, have.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
      // The segments' terms as reduce_batch's rows (term i of channel j at terms[i * c + j]),
      // then the centred squares about each channel's mean, each operation rounded to fp32.
      std::vector<double> terms(n * c), squares(n * c);
      for (size_t b = 0; b < shape.batch; ++b)
        for (size_t j = 0; j < c; ++j)
          for (size_t q = 0; q < p; ++q) terms[(b * p + q) * c + j] = x[(b * c + j) * p + q];
      std::vector<double> want(2 * c);
      reduce_batch(s, terms.data(), n, c, Arithmetic{}, NoiseKey{}, want.data());
      for (size_t j = 0; j < c; ++j) {
        const float mean = static_cast<float>(want[j]) / static_cast<float>(n);
        for (size_t i = 0; i < n; ++i) {
          const float d = static_cast<float>(terms[i * c + j]) - mean;
          squares[i * c + j] = d * d;
        }
      }
      reduce_batch(s, squares.data(), n, c, Arithmetic{}, NoiseKey{}, want.data() + c);
      size_t same = 0;
      for (size_t j = 0; j < 2 * c; ++j)
        same += std::bit_cast<uint32_t>(have[j]) == std::bit_cast<uint32_t>(static_cast<float>(want[j]));
      CHECK(same == 2 * c);
      ++ran;
    }
  CHECK(ran >= 20);
  CHECK(declined >= 12);  // seq and contig(8) on every shape
}

TEST_CASE("gpu segmented fused dots == sim::channel_dots bit for bit: cuDNN-form BatchNorm's dots") {
  // Which plans take a dot: the products are fused into the first pass's strided chains.
  CHECK(dot_why_not(plan_reduction(parse_schedule("strided(512):seq | contig(32):shfl_down | all:shfl_down"))).empty());
  CHECK_FALSE(dot_why_not(plan_reduction(parse_schedule("contig(8):seq | contig(32):shfl_down | all:seq"))).empty());
  CHECK_FALSE(dot_why_not(plan_reduction(parse_schedule("strided(128):seq | contig(4):seq | all:shfl_down"))).empty());
  if (!have_device()) return;
  const char* schedules[] = {// cuDNN's singleread BatchNorm kernels (h100-torch's layer rules)
                             "strided(512):seq | contig(32):shfl_down | all:shfl_down",
                             "strided(512):seq | contig(32):tree | all:tree",
                             "strided(256):seq | contig(32):shfl_xor | all:seq",
                             "strided(32):seq | all:shfl_up",
                             "cub-sum(256,1056)",
                             "strided(1024):seq | contig(32):seq | all:shfl_up"};
  const std::pair<size_t, size_t> shapes[] = {{1, 1}, {3, 5}, {64, 3}, {576, 16}, {3136, 4}, {12544, 2}, {50177, 3}};
  GpuSegmentedReduction gpu;
  size_t checked = 0;
  for (const char* text : schedules)
    for (const auto& [n, channels] : shapes) {
      const Schedule s = parse_schedule(text);
      // a tree stage runs as shfl_up where its groups are powers of two for this n (the caller's
      // choice: fplab.torch's); elsewhere the dots stay on the host
      const auto shuffles = trees_as_shuffles(s, n);
      if (!shuffles && s.stages[1].reducer.kind == Reducer::Kind::tree) continue;
      const ReductionPlan plan = plan_reduction(shuffles ? *shuffles : s);
      ++checked;
      const auto a = floats("normal:" + std::to_string(n * channels), n + channels);
      const auto b = floats("lognormal:" + std::to_string(n * channels), 3 * n + channels);
      std::vector<float> cpu(channels), on_gpu(channels, 1.0f);
      const std::vector<NoiseKey> keys(channels);
      // (outer 1, channels, inner n): channel c's terms are a[c·n ...], the layout run_dots reads
      channel_dots(s, Arithmetic{}, a.data(), b.data(), {1, channels, n}, keys, cpu.data());
      gpu.run_dots(plan, a.data(), b.data(), n, channels, on_gpu.data());
      size_t same = 0;
      for (size_t c = 0; c < channels; ++c) same += std::bit_cast<uint32_t>(cpu[c]) == std::bit_cast<uint32_t>(on_gpu[c]);
      INFO(text << ", " << n << " terms x " << channels << " channels");
      CHECK(same == channels);
    }
  CHECK(checked >= 38);  // all but the tree schedule's 3 and 5 terms a channel
}

TEST_CASE("gpu rsqrt of cuDNN's BatchNorm form == fp::cuda_rsqrt bit for bit") {
  if (!have_device()) return;
  std::vector<float> x;
  std::mt19937 g(11);
  std::uniform_int_distribution<uint32_t> any_bits(0, 0x7F7FFFFFu);  // every positive finite float
  for (int i = 0; i < 200000; ++i) x.push_back(std::bit_cast<float>(any_bits(g)));
  for (float v : {0.0f, -0.0f, 1.0f, 4.0f, 2.0f, 0.25f, 1e-45f, -1.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(), 1.00001f})
    x.push_back(v);
  std::vector<float> on_gpu(x.size());
  cuda_rsqrt_on_device(x.data(), x.size(), on_gpu.data());
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float cpu = fp::cuda_rsqrt(x[i]);
    same += std::bit_cast<uint32_t>(cpu) == std::bit_cast<uint32_t>(on_gpu[i]) || (std::isnan(cpu) && std::isnan(on_gpu[i]));
  }
  CHECK(same == x.size());
}

TEST_CASE("gpu plan: the seeded-order kernel takes GROUPS:{seq|atomic} [| all:{seq|atomic}]") {
  const SeededPlan h100 = plan_seeded(parse_schedule("strided(132):atomic | all:atomic"));
  CHECK(h100.first.kind == Grouping::Kind::strided);
  CHECK(h100.first.size == 132);
  CHECK((h100.first_atomic && h100.two_stages && h100.second_atomic));
  const SeededPlan one = plan_seeded(parse_schedule("all:atomic"));
  CHECK((one.first_atomic && !one.two_stages));
  CHECK_FALSE(plan_seeded(parse_schedule("contig(8):seq | all:atomic")).first_atomic);
  for (const char* text : {"strided(4):tree | all:seq", "strided(4):seq | contig(2):seq | all:seq", "contig(4):atomic",
                           "shuffle | all:seq", "strided(4):seq | strided(2):atomic"}) {
    INFO(text);
    CHECK_THROWS_AS(plan_seeded(parse_schedule(text)), NotRealisable);
  }
}

TEST_CASE("gpu seeded sums == sim::reduce_batch bit for bit: atomic steps in the impl seed's orders") {
  if (!have_device()) return;
  const char* schedules[] = {"strided(132):atomic | all:atomic",  // h100's bias gradients
                             "all:atomic",
                             "strided(8):atomic | all:atomic",
                             "contig(7):atomic | all:seq",
                             "split(5):seq | all:atomic",
                             "strided(3):seq | all:atomic",
                             "strided(3):atomic | all:seq",
                             "all:seq"};
  // 20000 rows: permutations longer than shared memory holds (made in global memory), and runs of
  // draws (256 at a time) ending mid-permutation. By rows (segments), strided groups of 128 to 1536
  // members are staged through shared memory (first_stage_staged): strided(132) at 20000 rows,
  // strided(8) at 1024 (with 130 outputs: three tiles of keys), 4096 and 12288 (1536 members: 96
  // KiB, above the default limit), strided(3) (three groups, fewer than a block's 8) at 1000 and
  // 4096; strided(8) at 12289 rows (1537 members) and 20000 are not.
  const std::pair<size_t, size_t> shapes[] = {{1, 1},      {10, 64},  {64, 10},  {131, 130},
                                              {1024, 130}, {33, 7},   {1000, 3}, {4096, 2},
                                              {12288, 2},  {12289, 2}, {20000, 2}};
  const NoiseKey keys[] = {{3, 17, 5}, {4, 17, 5}};
  for (const char* text : schedules)
    for (const auto& [rows, cols] : shapes)
      for (const NoiseKey& key : keys) {
        const Schedule s = parse_schedule(text);
        const auto x = floats("lognormal:" + std::to_string(rows * cols), rows * 7 + cols);
        const std::vector<double> terms(x.begin(), x.end());
        std::vector<double> cpu(cols);
        reduce_batch(s, terms.data(), rows, cols, Arithmetic{}, key, cpu.data());
        const auto by_columns = reduce_batch_seeded(s, x, {rows, cols, cols, 1}, key);
        const auto by_rows = reduce_batch_seeded(s, transposed_of(x, rows, cols), {rows, cols, 1, rows}, key);
        INFO(text << ", " << rows << " rows x " << cols << " columns, impl seed " << key.impl_seed);
        CHECK(same_both_ways(by_columns, by_rows, cpu) == cols);
      }
}

TEST_CASE("gpu seeded sums, two batches keyed apart in one run == each batch's sim::reduce_batch") {
  if (!have_device()) return;
  // A BatchNorm's two bias-gradient sums as one run: segments (term_stride 1), the second batch
  // starting mid-tile of the first's tiles (kBatchTileOutputs does not divide 5 or 67).
  const char* schedules[] = {"strided(132):atomic | all:atomic", "all:atomic", "contig(7):atomic | all:seq"};
  const std::pair<size_t, size_t> shapes[] = {{1000, 5}, {300, 67}, {20000, 2}};  // terms, outputs a batch
  const NoiseKey first{3, 40, 9}, second{3, 41, 9};
  for (const char* text : schedules)
    for (const auto& [n, outputs] : shapes) {
      const Schedule s = parse_schedule(text);
      const auto x = floats("lognormal:" + std::to_string(2 * n * outputs), n + outputs);
      const std::vector<double> terms(x.begin(), x.end());
      std::vector<double> cpu_first(outputs), cpu_second(outputs);
      // reduce_batch's terms: term t of output o at t * outputs + o; here output o's at o * n + t
      const auto batch = [&](size_t from) {
        std::vector<double> out(n * outputs);
        for (size_t o = 0; o < outputs; ++o)
          for (size_t t = 0; t < n; ++t) out[t * outputs + o] = terms[(from + o) * n + t];
        return out;
      };
      reduce_batch(s, batch(0).data(), n, outputs, Arithmetic{}, first, cpu_first.data());
      reduce_batch(s, batch(outputs).data(), n, outputs, Arithmetic{}, second, cpu_second.data());
      const auto both = reduce_batch_seeded(s, x, {n, 2 * outputs, 1, n}, first, outputs, second);
      INFO(text << ", " << n << " terms, 2 x " << outputs << " outputs");
      size_t same = 0;
      for (size_t o = 0; o < outputs; ++o) {
        const auto bits = [](double v) { return std::bit_cast<uint32_t>(static_cast<float>(v)); };
        same += bits(cpu_first[o]) == std::bit_cast<uint32_t>(both[o]);
        same += bits(cpu_second[o]) == std::bit_cast<uint32_t>(both[outputs + o]);
      }
      CHECK(same == 2 * outputs);
      CHECK(reduce_batch_seeded(s, x, {n, 2 * outputs, 1, n}, first) != both);  // the second key drew its orders
    }
}

TEST_CASE("gpu gemm, atomic combine in the impl seed's order == sim::gemm with that key") {
  if (!have_device()) return;
  const char* schedules[] = {"split(80):seq | all:atomic",  // v100's weight gradients
                             "split(56):seq | all:atomic", "split(3):seq | all:atomic", "contig(33):seq | all:atomic",
                             // cuDNN's weight gradient at 28 x 28 (h100-torch), and runs not cut evenly
                             "each(784)[contig(512):seq] | all:atomic", "each(50)[contig(16):seq] | all:atomic",
                             // cuDNN's input gradient of a 256 -> 256 3x3 convolution at 8x8, and parts of
                             // unequal lengths
                             "strided(9):seq | all:atomic", "strided(7):seq | all:atomic"};
  // Ragged 4 x 64 output tiles both ways, parts longer and shorter than a wide tile's K, one part.
  const GemmShape shapes[] = {{1, 1, 1}, {4, 64, 200}, {5, 65, 333}, {576, 64, 2048}, {130, 9, 4096}, {7, 300, 2}};
  const NoiseKey keys[] = {{3, 17, 5}, {4, 17, 5}, {3, 18, 5}};
  for (const char* text : schedules)
    for (const GemmShape& shape : shapes) {
      const Schedule s = parse_schedule(text);
      const auto a = floats("lognormal:" + std::to_string(shape.m * shape.k), shape.m * 3 + shape.k);
      const auto b = floats("normal:" + std::to_string(shape.k * shape.n), shape.n * 5 + shape.k);
      std::vector<std::vector<float>> by_key;
      for (const NoiseKey& key : keys) {
        std::vector<float> cpu(shape.m * shape.n), gpu(cpu.size());
        sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{}, key);
        gemm_seeded(s, a.data(), b.data(), gpu.data(), shape, key);
        size_t same = 0;
        for (size_t i = 0; i < cpu.size(); ++i) same += std::bit_cast<uint32_t>(cpu[i]) == std::bit_cast<uint32_t>(gpu[i]);
        INFO(text << ", " << shape.m << " x " << shape.n << " x " << shape.k << ", impl seed " << key.impl_seed
                  << ", op " << key.op_id);
        CHECK(same == cpu.size());
        by_key.push_back(gpu);
      }
      // Seven parts or more over 64 outputs or more: the keys' orders give other bits.
      if (plan_gemm(s).part_count(static_cast<int64_t>(shape.k)) >= 7 && shape.m * shape.n >= 64) {
        INFO(text << ", " << shape.m << " x " << shape.n << " x " << shape.k);
        CHECK(by_key[0] != by_key[1]);
        CHECK(by_key[0] != by_key[2]);
      }
    }
  CHECK(seeded_gemm_why_not() == "");
}

TEST_CASE("gpu gemm, seeded combine in slabs of rows (parts past 256 MiB) == sim::gemm") {
  if (!have_device()) return;
  // 80 parts x 1024 columns: slabs of 816 rows, so three for 2000 rows, the last one ragged.
  const Schedule s = parse_schedule("split(80):seq | all:atomic");
  const GemmShape shape{2000, 1024, 160};
  const auto a = floats("lognormal:" + std::to_string(shape.m * shape.k), 11);
  const auto b = floats("normal:" + std::to_string(shape.k * shape.n), 12);
  const NoiseKey key{9, 8, 7};
  std::vector<float> cpu(shape.m * shape.n), gpu(cpu.size());
  sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{}, key);
  gemm_seeded(s, a.data(), b.data(), gpu.data(), shape, key);
  size_t same = 0;
  for (size_t i = 0; i < cpu.size(); ++i) same += std::bit_cast<uint32_t>(cpu[i]) == std::bit_cast<uint32_t>(gpu[i]);
  CHECK(same == cpu.size());
}

TEST_CASE("gpu gemm: the serial form's timeline — each tile's parts release in part order; flags left ready") {
  if (!have_device()) return;
  const GemmShape shape{520, 1030, 2000};  // 153 tiles x 16 parts: more blocks than the chip holds
  const auto a = floats("normal:" + std::to_string(shape.m * shape.k), 31);
  const auto b = floats("lognormal:" + std::to_string(shape.k * shape.n), 32);
  const Schedule s = parse_schedule("split(16):seq | all:seq");
  GpuGemm gpu(a.data(), b.data(), shape);
  const auto blocks = GpuGemmProbe::serial_timeline(gpu, plan_gemm(s));
  REQUIRE(blocks.size() == 153 * 16);
  // By tile, the parts' end times (after their release) never go back: part p waited for p - 1.
  std::vector<unsigned long long> last_end(153, 0);
  size_t in_order = 0, sane = 0;
  for (const auto& blk : blocks) {  // linear block index: part-major, so p - 1 of a tile comes first
    in_order += blk.end_ns >= last_end[blk.tile];
    last_end[blk.tile] = blk.end_ns;
    sane += blk.end_ns >= blk.start_ns && blk.chains_cycles > 0 && blk.tail_cycles > 0;
  }
  CHECK(in_order == blocks.size());
  CHECK(sane == blocks.size());
  CHECK_THROWS_AS(GpuGemmProbe::serial_timeline(gpu, plan_gemm(parse_schedule("split(16):seq | all:atomic"))),
                  NotRealisable);
  // The timed run left the flags ready: the next serial run is exact.
  std::vector<float> out(shape.m * shape.n), cpu(shape.m * shape.n);
  sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{});
  GpuGemmProbe::force_ordered_form(gpu, GpuGemm::OrderedForm::serial);
  gpu.run(plan_gemm(s), out.data());
  size_t same = 0;
  for (size_t i = 0; i < out.size(); ++i) same += std::bit_cast<uint32_t>(out[i]) == std::bit_cast<uint32_t>(cpu[i]);
  CHECK(same == out.size());
}

namespace {

// Orders of two-term additions the reduction kernels do not take: numpy's pairwise sum, tpu-v3's
// trees and systolic passes, PyTorch's and CUB's, and stages around them.
const char* const kProgramSchedules[] = {"numpy", "pairwise", "all:rev", "strided(128):seq | all:tree", "systolic(128)",
                                         "all:seq", "strided(32):seq | all:shfl_down", "torch-cpu-sum(8)",
                                         "cub-sum(256,4)", "each(40)[contig(16):seq] | all:tree",
                                         "cols(9) | all:tree", "body(8)[strided(4):seq | perm(1,0,3,2) | all:tree] | all:seq",
                                         "contig(7):shfl_xor | strided(3):numpy_pairwise | all:rev"};

}  // namespace

TEST_CASE("gpu addition program: the schedule's additions in post-order == sim::reduce (host reading)") {
  for (const char* text : kProgramSchedules)
    for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{33}, size_t{100}, size_t{1000}, size_t{4097}}) {
      const Schedule s = parse_schedule(text);
      const AdditionProgram program = addition_program(s, n);
      CHECK(program.depth <= kMaxProgramDepth);
      const auto x = floats("lognormal:" + std::to_string(n), n + 3);
      const float got = run_addition_program(program, [&](int32_t t) { return x[static_cast<size_t>(t)]; });
      INFO(text << " over " << n);
      CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(cpu_reduce(s, x)));
      // every term read once
      size_t reads = 0;
      for (int32_t op : program.ops) reads += op != AdditionProgram::kAdd;
      CHECK(reads == n);
    }
  // a chain holds two values, a pairwise tree about log2(n)
  CHECK(addition_program(parse_schedule("all:seq"), 100000).depth <= 2);
  CHECK(addition_program(parse_schedule("pairwise"), 100000).depth <= 18);
  // rounded products: the same program over fl(a b)
  const Schedule systolic = parse_schedule("systolic(128)");
  const GemmShape shape{3, 5, 300};
  const auto a = floats("normal:" + std::to_string(shape.m * shape.k), 1), b = floats("lognormal:" + std::to_string(shape.k * shape.n), 2);
  Arithmetic rounded;
  rounded.products = Products::rounded;
  std::vector<float> c(shape.m * shape.n);
  sim::gemm(systolic, a.data(), b.data(), c.data(), shape, rounded);
  const AdditionProgram program = addition_program(systolic, shape.k);
  for (size_t i = 0; i < shape.m; ++i)
    for (size_t j = 0; j < shape.n; ++j) {
      const float got = run_addition_program(program, [&](int32_t t) {
        return a[i * shape.k + static_cast<size_t>(t)] * b[static_cast<size_t>(t) * shape.n + j];
      });
      CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(c[i * shape.n + j]));
    }
  // refused, in one line naming the schedule
  for (const char* text : {"atomic", "shuffle | all:seq", "kahan", "all:exact", "tc-h100-tf32", "binned",
                           "contig(4):seq@fp64 | all:seq", "nccl-ring(4)", "contig(3):ring | all:seq"}) {
    const Schedule s = parse_schedule(text);
    CHECK(addition_program_why_not(s).rfind("schedule '" + to_string(s) + "' is not realisable by the GPU addition program: ", 0) == 0);
    CHECK_THROWS_AS(addition_program(s, 10), NotRealisable);
  }
}

TEST_CASE("gpu addition program == sim::reduce_batch and sim::gemm (rounded products) bit for bit") {
  if (!have_device()) return;
  const std::pair<size_t, size_t> shapes[] = {{1, 1}, {10, 64}, {64, 10}, {131, 130}, {4097, 3}};
  for (const char* text : kProgramSchedules)
    for (const auto& [rows, cols] : shapes) {
      const Schedule s = parse_schedule(text);
      const auto x = floats("lognormal:" + std::to_string(rows * cols), rows * 5 + cols);
      const std::vector<double> terms(x.begin(), x.end());
      std::vector<double> cpu(cols);
      reduce_batch(s, terms.data(), rows, cols, Arithmetic{}, NoiseKey{}, cpu.data());
      const auto by_columns = reduce_batch_program(s, x, {rows, cols, cols, 1});
      const auto by_rows = reduce_batch_program(s, transposed_of(x, rows, cols), {rows, cols, 1, rows});
      INFO(text << ", " << rows << " rows x " << cols << " columns");
      CHECK(same_both_ways(by_columns, by_rows, cpu) == cols);
    }
  Arithmetic rounded;
  rounded.products = Products::rounded;
  for (const char* text : {"all:seq", "systolic(128)", "pairwise", "strided(128):seq | all:tree"})
    for (const GemmShape& shape : {GemmShape{1, 1, 1}, GemmShape{7, 13, 33}, GemmShape{65, 70, 1000}, GemmShape{3, 5, 0}}) {
      const Schedule s = parse_schedule(text);
      const auto a = floats("normal:" + std::to_string(shape.m * shape.k + 1), shape.k);
      const auto b = floats("lognormal:" + std::to_string(shape.k * shape.n + 1), shape.k + 1);
      std::vector<float> cpu(shape.m * shape.n);
      sim::gemm(s, a.data(), b.data(), cpu.data(), shape, rounded);
      const auto gpu = gemm_rounded_program(s, a.data(), b.data(), shape);
      size_t same = 0;
      for (size_t i = 0; i < cpu.size(); ++i) same += std::bit_cast<uint32_t>(cpu[i]) == std::bit_cast<uint32_t>(gpu[i]);
      INFO(text << ", " << shape.m << "x" << shape.n << "x" << shape.k);
      CHECK(same == cpu.size());
    }
}

TEST_CASE("gpu exact gemm == sim::gemm's all:exact bit for bit: wide ranges, zeros, cancellation, specials") {
  CHECK(exact_sum_schedule(parse_schedule("all:exact")));
  CHECK(exact_sum_schedule(parse_schedule("shuffle | all:exact")));
  CHECK_FALSE(exact_sum_schedule(parse_schedule("binned")));
  CHECK_FALSE(exact_sum_schedule(parse_schedule("contig(4):exact | all:seq")));
  if (!have_device()) return;
  const Schedule exact = parse_schedule("all:exact");
  Arithmetic arithmetic;
  arithmetic.products = Products::exact;
  // {4, 9, 5000}: few outputs over a long K, taken in parts of K and merged
  const GemmShape shapes[] = {{1, 1, 1}, {7, 13, 33}, {65, 70, 1000}, {3, 5, 0}, {4, 9, 5000}};
  for (const char* spec : {"normal", "lognormal"})
    for (const GemmShape& shape : shapes)
      for (int variant = 0; variant < 3; ++variant) {
        auto a = floats(std::string(spec) + ":" + std::to_string(shape.m * shape.k + 1), shape.k + variant);
        auto b = floats("lognormal:" + std::to_string(shape.k * shape.n + 1), shape.k + 7);
        if (variant == 1)  // zero rows (every product zero, some rows all of negative sign) and cancelling pairs
          for (size_t i = 0; i < shape.m; ++i)
            for (size_t t = 0; t < shape.k; ++t) {
              if (i % 3 == 0) a[i * shape.k + t] = i % 2 ? -0.0f : 0.0f;
              if (i % 3 == 1 && t % 2 == 1) a[i * shape.k + t] = a[i * shape.k + t - 1];
            }
        if (variant == 2)  // wide exponents, subnormal factors, a few infinities and NaNs
          for (size_t e = 0; e < a.size(); ++e) {
            a[e] = std::ldexp(a[e], static_cast<int>(e % 61) * 4 - 150);
            if (e % 97 == 5) a[e] = e % 2 ? INFINITY : NAN;
          }
        std::vector<float> cpu(shape.m * shape.n);
        sim::gemm(exact, a.data(), b.data(), cpu.data(), shape, arithmetic);
        const std::vector<float> gpu = exact_gemm_on_gpu(a.data(), b.data(), shape);
        size_t same = 0;
        for (size_t i = 0; i < cpu.size(); ++i)
          same += std::bit_cast<uint32_t>(cpu[i]) == std::bit_cast<uint32_t>(gpu[i]) ||
                  (std::isnan(cpu[i]) && std::isnan(gpu[i]));
        INFO(spec << " variant " << variant << ", " << shape.m << "x" << shape.n << "x" << shape.k);
        CHECK(same == cpu.size());
      }
}
