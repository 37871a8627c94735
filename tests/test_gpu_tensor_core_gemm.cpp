// The tensor-core GEMM (sim/cuda/gpu_tensor_core_gemm.hpp) against sim::gemm, bit for bit: which
// schedules it takes (checked everywhere), and on a Hopper GPU every output of every tc-h100
// model, schedule and shape on ordinary data and on data chosen to make the chip and the model
// part (sums past 2^128, negative sums below fp32's smallest subnormal, zero rows, infinities and
// NaNs), where the kernel must redo the instruction in software. Elsewhere the GPU cases say
// "SKIPPED: ..." and pass.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/gpu_tensor_core_gemm.hpp"
#include "sim/engine.hpp"
#include "tests/gpu_device_or_skip.hpp"

using namespace fplab;
using namespace fplab::sim;
using namespace fplab::sim::gpu;

namespace {

constexpr const char* kModels[] = {"tc-h100-tf32", "tc-h100-tf32-rne", "tc-h100-tf32-rna", "tc-h100-bf16",
                                   "tc-h100-fp16"};

// The models whose steps no H100 mma instruction computes: fused steps in software on CUDA cores.
constexpr const char* kSoftwareModels[] = {"tc-v100", "tc-turing-unconverted", "tc-a100", "tc-a100-bf16",
                                           "tc-a100-tf32"};

bool hopper() {
  if (!test::have_device()) return false;
  const std::string why = tensor_core_gemm_device_why_not();  // not the probe: a failing probe must fail here
  if (!why.empty()) WARN("SKIPPED: " << why);
  return why.empty();
}

// Values whose products and sums leave the ordinary range: 2^e with e from [lo, hi], `zeros` of
// them +0 or -0, with `specials` a share of 0.002 NaNs and infinities.
std::vector<float> data(size_t count, uint64_t seed, int lo, int hi, double zeros, bool specials) {
  return tensor_core_probe_values(count, seed, lo, hi, zeros, specials ? 0.002 : 0.0);
}

// The same bits, or both NaN (a split-K fold's NaN has the GPU adder's bits, 0x7fffffff).
bool same_result(float x, float y) {
  return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y) || (std::isnan(x) && std::isnan(y));
}

size_t same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i) same += same_result(x[i], y[i]);
  return same;
}

void check_against_cpu(const std::string& text, const std::vector<float>& a, const std::vector<float>& b,
                       GemmShape shape, const std::string& what) {
  const Schedule s = parse_schedule(text);
  std::vector<float> cpu(shape.m * shape.n);
  sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{});
  // both of the kernel's block shapes, whichever the shape would pick
  for (const TensorCoreBlock block : {TensorCoreBlock::wide, TensorCoreBlock::narrow}) {
    const std::vector<float> gpu = tensor_core_gemm(s, a.data(), b.data(), shape, block);
    size_t first = 0;
    while (first < gpu.size() && same_result(gpu[first], cpu[first])) ++first;
    INFO(text << ", " << shape.m << "x" << shape.n << "x" << shape.k << ", " << what << ", "
              << (block == TensorCoreBlock::wide ? "64 x 64" : "32 x 16") << " blocks");
    if (first < gpu.size()) INFO("first difference at " << first << ": gpu " << gpu[first] << " cpu " << cpu[first]);
    CHECK(same_bits(gpu, cpu) == gpu.size());
  }
}

}  // namespace

TEST_CASE("tensor-core gemm plan: the tc-h100 models' chains and ordered split-K") {
  for (const char* model : kModels) {
    const TensorCoreGemmPlan one = plan_tensor_core_gemm(parse_schedule(std::string("all:fused(") + model + ")"));
    CHECK(one.parts.parts == GemmPlan::Parts::one);
    const TensorCoreGemmPlan split =
        plan_tensor_core_gemm(parse_schedule(std::string("split(16):fused(") + model + ") | all:seq"));
    CHECK(split.parts.parts == GemmPlan::Parts::split);
    CHECK(split.parts.size == 16);
    CHECK(split.parts.part_count(1000) == 16);
  }
  CHECK(plan_tensor_core_gemm(parse_schedule("all:fused(tc-h100-bf16)")).factors == Reducer::Input::bf16);
  CHECK(plan_tensor_core_gemm(parse_schedule("contig(40):fused(8,25,tf32rna) | all:seq")).factors ==
        Reducer::Input::tf32rna);
  CHECK(plan_tensor_core_gemm(parse_schedule("all:fused(tc-h100-fp16)")).products() == 16);
}

TEST_CASE(
    "tensor-core gemm plan: deal(P,B)[all:fused] | cols(R) | all:seq: dealt parts folded in the reordered order") {
  const TensorCoreGemmPlan plan =
      plan_tensor_core_gemm(parse_schedule("deal(90,64)[all:fused(tc-h100-tf32-rna)] | cols(89) | all:seq"));
  CHECK(plan.factors == Reducer::Input::tf32rna);
  CHECK_FALSE(plan.cuda_cores);
  CHECK(plan.parts.parts == GemmPlan::Parts::dealt);
  CHECK(plan.parts.part_count(12544) == 90);
  CHECK(plan.parts.part_count(64 * 10 + 3) == 11);  // a hand a tile, the last one short
  const std::vector<size_t> fold = plan.fold_order(12544);
  REQUIRE(fold.size() == 90);
  CHECK(fold[0] == 0);
  CHECK(fold[1] == 89);
  CHECK(fold[2] == 1);
  CHECK(fold[89] == 88);
  CHECK(plan_tensor_core_gemm(parse_schedule("deal(4,8)[all:fused(tc-h100-tf32)] | all:seq")).fold_order(100).empty());
  // The route a convolution's GEMM takes: the tensor-core plan, nothing gathered in front of it.
  const OrderedGemmRoute route = plan_ordered_gemm(parse_schedule("deal(4,8)[all:fused(tc-h100-bf16)] | all:seq"));
  CHECK_FALSE(route.order);
  CHECK(std::holds_alternative<TensorCoreGemmPlan>(route.rest));
}

TEST_CASE("tensor-core gemm plan: models no H100 instruction computes go to fused steps on CUDA cores") {
  for (const char* model : kSoftwareModels) {
    INFO(model);
    const TensorCoreGemmPlan plan = plan_tensor_core_gemm(parse_schedule(std::string("all:fused(") + model + ")"));
    CHECK(plan.cuda_cores);
  }
  const TensorCoreGemmPlan a100 = plan_tensor_core_gemm(parse_schedule("split(16):fused(tc-a100-tf32) | all:seq"));
  CHECK(a100.step_products == 4);
  CHECK(a100.fraction_bits == 24);
  CHECK(a100.factors == Reducer::Input::tf32);
  CHECK(a100.parts.size == 16);
  CHECK(plan_tensor_core_gemm(parse_schedule("all:fused(16,25,tf32)")).cuda_cores);  // 8 a step on the H100
  CHECK(plan_tensor_core_gemm(parse_schedule("all:fused(8,25)")).cuda_cores);  // factors as they are
  CHECK_FALSE(plan_tensor_core_gemm(parse_schedule("all:fused(tc-h100-tf32)")).cuda_cores);
}

TEST_CASE("tensor-core gemm plan: other models and orders are refused in one line") {
  for (const char* text :
       {"all:fused(tc-h100-fp8)", "all:fused(32,13,e4m3)", "all:fused(8,26,tf32)", "all:fused(3,23,tf32)",
        "split(16):fused(tc-h100-tf32) | all:tree", "split(4):fused(tc-h100-tf32) | all:shfl_down", "all:seq",
        "strided(4):fused(tc-h100-tf32) | all:seq", "deal(4,8)[all:fused(tc-h100-tf32)] | all:tree",
        "deal(4,8)[all:fused(tc-a100)] | all:seq", "deal(4,8)[contig(8):fused(tc-h100-tf32)] | all:seq",
        "deal(4,8)[all:fused(tc-h100-tf32)] | contig(2):seq | all:seq"}) {
    INFO(text);
    try {
      plan_tensor_core_gemm(parse_schedule(text));
      FAIL("accepted");
    } catch (const NotRealisable& e) {
      const std::string what = e.what();
      CHECK(what.find("tensor-core GEMM kernel") != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("tensor-core gemm == sim::gemm bit for bit: every tc-h100 model, chains and split-K, awkward shapes") {
  if (!hopper()) return;
  // Edges in every direction, and whole blocks with long chains (the chip's results, no edge redone).
  const GemmShape shapes[] = {{1, 1, 1},       {17, 9, 13},   {64, 64, 32},   {70, 130, 257},
                              {129, 65, 1000}, {3, 200, 4099}, {128, 128, 4099}, {192, 64, 1000}};
  for (const char* model : kModels)
    for (const std::string order : {"all:fused(M)", "split(3):fused(M) | all:seq", "split(16):fused(M) | all:seq",
                                    "contig(40):fused(M) | all:seq"}) {
      const std::string text = order.substr(0, order.find('M')) + model + order.substr(order.find('M') + 1);
      for (const GemmShape& shape : shapes) {
        const auto a = data(shape.m * shape.k, shape.k, -3, 3, 0.0, false);
        const auto b = data(shape.k * shape.n, shape.k + 1, -3, 3, 0.0, false);
        check_against_cpu(text, a, b, shape, "normal data");
      }
    }
}

TEST_CASE("tensor-core gemm == sim::gemm bit for bit: dealt split-K slices, folded in a reordered order") {
  if (!hopper()) return;
  // cuDNN's TF32 weight gradient of small_cnn's 16 -> 32 layer at 14 x 14 (batch 64: K = 12 544), and
  // dealt tiles with a last short one, fewer tiles than hands, one hand.
  const std::pair<std::string, GemmShape> cases[] = {
      {"deal(90,64)[all:fused(tc-h100-tf32-rna)] | cols(89) | all:seq", {144, 32, 12544}},
      {"deal(90,64)[all:fused(tc-h100-tf32-rna)] | cols(89) | all:seq", {144, 32, 6272}},
      {"deal(7,24)[all:fused(tc-h100-tf32-rne)] | cols(3) | all:seq", {70, 130, 1001}},
      {"deal(7,24)[all:fused(tc-h100-bf16)] | perm(2,0,1) | all:seq", {17, 9, 100}},
      {"deal(3,40)[all:fused(tc-h100-fp16)] | all:seq", {129, 65, 13}},
      {"deal(1,16)[all:fused(tc-h100-tf32)] | all:seq", {64, 64, 257}}};
  for (const auto& [text, shape] : cases) {
    const auto a = data(shape.m * shape.k, shape.k, -3, 3, 0.0, false);
    const auto b = data(shape.k * shape.n, shape.k + 1, -3, 3, 0.0, false);
    check_against_cpu(text, a, b, shape, "normal data");
  }
}

TEST_CASE("tensor-core gemm == sim::gemm where the chip and the model part: overflow, underflow, zeros, specials") {
  if (!hopper()) return;
  const GemmShape shape{96, 72, 300};
  struct Case {
    const char* what;
    int a_lo, a_hi, b_lo, b_hi;
    double zeros;
    bool specials;
  };
  const Case cases[] = {
      {"sums past 2^128", 60, 64, 60, 66, 0.0, false},
      {"negative sums below 2^-149", -80, -74, -80, -74, 0.0, false},
      {"zeros of both signs", -3, 3, -3, 3, 0.6, false},
      {"wide range", -70, 60, -70, 60, 0.1, false},
      {"infinities and NaNs", -3, 3, -3, 3, 0.05, true},
  };
  for (const Case& c : cases)
    for (const char* model : kModels)
      for (const std::string head : {"all:fused(", "split(5):fused("}) {
        const std::string text = head + model + (head[0] == 's' ? ") | all:seq" : ")");
        auto a = data(shape.m * shape.k, 7, c.a_lo, c.a_hi, c.zeros, c.specials);
        const auto b = data(shape.k * shape.n, 8, c.b_lo, c.b_hi, c.zeros, c.specials);
        if (c.zeros > 0)
          for (size_t i = 0; i < shape.m; i += 5)
            for (size_t t = 0; t < shape.k; ++t) a[i * shape.k + t] = (t % 3 ? 0.0f : -0.0f);  // zero rows
        check_against_cpu(text, a, b, shape, c.what);
      }
}

TEST_CASE("tensor-core gemm: zeros the chip gives +0 and the model -0, inside a stage and across stages") {
  if (!hopper()) return;
  // Row i's first 8 products are tiny and negative: their exact sum, below 2^-149, is -0 on both
  // (rounded toward zero); every later product is -0 (a -0 factor times a positive one), which
  // the model adds to its -0 accumulator as -0 and the chip, from an exact zero, as +0. Rows
  // i % 4 == 1 start with positive products instead (their zeros +0 on both); i % 4 == 2 put the
  // tiny products at 40, inside a later stage; i % 4 == 3 are zeros throughout (from +0: +0).
  const GemmShape shape{64, 24, 200};
  std::vector<float> a(shape.m * shape.k), b(shape.k * shape.n);
  for (size_t i = 0; i < shape.m; ++i)
    for (size_t t = 0; t < shape.k; ++t) {
      const size_t tiny_from = i % 4 == 2 ? 40 : 0;
      const bool tiny = i % 4 != 3 && t >= tiny_from && t < tiny_from + 8;
      a[i * shape.k + t] = tiny ? (i % 4 == 1 ? 1.5f : -std::ldexp(1.0f, -80)) : -0.0f;
    }
  for (size_t t = 0; t < shape.k; ++t)
    for (size_t j = 0; j < shape.n; ++j) b[t * shape.n + j] = std::ldexp(1.0f + static_cast<float>(j) / 32, -80);
  for (const char* model : kModels)
    for (const std::string head : {"all:fused(", "split(5):fused("})
      check_against_cpu(head + model + (head[0] == 's' ? ") | all:seq" : ")"), a, b, shape, "-0 after an underflow");
  // the model's answers are what the comment says (so the case tests what it means to)
  std::vector<float> cpu(shape.m * shape.n);
  sim::gemm(parse_schedule("tc-h100-tf32"), a.data(), b.data(), cpu.data(), shape, Arithmetic{});
  CHECK(std::bit_cast<uint32_t>(cpu[0]) == 0x80000000u);
  CHECK(std::bit_cast<uint32_t>(cpu[2 * shape.n]) == 0x80000000u);
  CHECK(std::bit_cast<uint32_t>(cpu[3 * shape.n]) == 0u);
}

TEST_CASE("fused steps on CUDA cores == sim::gemm bit for bit: every other model, chains and split-K, any GPU") {
  if (!test::have_device()) return;
  const GemmShape shapes[] = {{1, 1, 1}, {17, 9, 13}, {70, 130, 257}, {3, 200, 4099}, {40, 33, 1000}};
  for (const char* model : kSoftwareModels)
    for (const std::string order : {"all:fused(M)", "split(3):fused(M) | all:seq", "contig(40):fused(M) | all:seq"}) {
      const std::string text = order.substr(0, order.find('M')) + model + order.substr(order.find('M') + 1);
      for (const GemmShape& shape : shapes) {
        const auto a = data(shape.m * shape.k, shape.k, -3, 3, 0.0, false);
        const auto b = data(shape.k * shape.n, shape.k + 1, -3, 3, 0.0, false);
        check_against_cpu(text, a, b, shape, "normal data");
      }
    }
  // where the cut terms and the result leave the ordinary range, with zeros, infinities, NaNs, and
  // subnormal factors whose products are the largest of their step (B's exponents: A's + shift)
  const GemmShape shape{48, 40, 300};
  for (const char* model : kSoftwareModels)
    for (const auto& [what, lo, hi, zeros, specials, shift] :
         {std::tuple{"sums past 2^128", 60, 66, 0.0, false, 0}, std::tuple{"below 2^-149", -80, -74, 0.0, false, 0},
          std::tuple{"wide range, zeros", -70, 60, 0.2, false, 0},
          std::tuple{"infinities and NaNs", -3, 3, 0.05, true, 0},
          std::tuple{"subnormal times 2^100", -148, -127, 0.0, false, 230}}) {
      const auto a = data(shape.m * shape.k, 17, lo, hi, zeros, specials);
      const auto b = data(shape.k * shape.n, 18, lo + shift, hi + shift, zeros, specials);
      check_against_cpu(std::string("split(5):fused(") + model + ") | all:seq", a, b, shape, what);
    }
}

TEST_CASE("tensor-core gemm, split-K parts added by atomics in the impl seed's order == sim::gemm with that key") {
  // rtx5000-tc's weight gradients: split(48):fused(4,23) | all:atomic (fused steps in software)
  CHECK_FALSE(plan_tensor_core_gemm(parse_schedule("split(48):fused(4,23) | all:atomic")).parts.deterministic());
  if (!test::have_device()) return;
  const GemmShape shapes[] = {{1, 1, 1}, {17, 9, 13}, {70, 130, 257}, {576, 64, 2048}};
  const NoiseKey keys[] = {{3, 17, 5}, {4, 17, 5}};
  std::vector<const char*> models(std::begin(kSoftwareModels), std::end(kSoftwareModels));
  if (hopper()) models.insert(models.end(), std::begin(kModels), std::end(kModels));
  for (const char* model : models)
    for (const std::string head : {"split(48):fused(", "contig(40):fused("})
      for (const GemmShape& shape : shapes) {
        const Schedule s = parse_schedule(head + model + ") | all:atomic");
        const auto a = data(shape.m * shape.k, shape.k, -3, 3, 0.05, false);
        const auto b = data(shape.k * shape.n, shape.k + 1, -3, 3, 0.05, false);
        std::vector<std::vector<float>> by_key;
        for (const NoiseKey& key : keys) {
          std::vector<float> cpu(shape.m * shape.n);
          sim::gemm(s, a.data(), b.data(), cpu.data(), shape, Arithmetic{}, key);
          const std::vector<float> gpu = tensor_core_gemm(s, a.data(), b.data(), shape, std::nullopt, key);
          INFO(to_string(s) << ", " << shape.m << "x" << shape.n << "x" << shape.k << ", impl seed " << key.impl_seed);
          CHECK(same_bits(gpu, cpu) == gpu.size());
          by_key.push_back(gpu);
        }
        if (shape.k >= 2048) CHECK(by_key[0] != by_key[1]);  // another seed, another order of the parts
      }
}

TEST_CASE("tensor-core gemm: K = 0 gives +0, an empty output is fine") {
  if (!hopper()) return;
  const Schedule s = parse_schedule("all:fused(tc-h100-tf32)");
  const std::vector<float> none;
  const std::vector<float> c = tensor_core_gemm(s, none.data(), none.data(), {3, 4, 0});
  for (float x : c) CHECK(std::bit_cast<uint32_t>(x) == 0u);
  CHECK(tensor_core_gemm(s, none.data(), none.data(), {0, 4, 5}).empty());
}

TEST_CASE("tensor-core gemm: the check before first use passes, and is kept per device") {
  if (!hopper()) return;
  CHECK(tensor_core_gemm_why_not() == "");
  CHECK(tensor_core_gemm_why_not() == "");  // the second answer from the cache
}
