// A GEMM with K = 0 (an MLP layer of width 0 used to reach one): every output is the empty sum,
// +0, whatever the schedule, arithmetic or tile shape, and A and B (m x 0 and 0 x n, here null)
// are never read, nor offset (UBSan, scripts/test --sanitize, checks that). The arithmetics and
// schedules select every path sim::gemm has for K > 0: FMA chains (fp32, fused products, a seq
// first stage), rounded products, the exact GEMM, the product-term walker, the tensor-core lane
// form and the generic emulated arithmetic. Built twice, like test_engine_vs_reference: against
// the native sim/ (AVX-512 or AVX2 microkernels) and against sim_portable (scalar fallbacks).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/presets.hpp"
#include "sim/reference_evaluator.hpp"
#include "tests/arithmetic_of.hpp"

using namespace fplab;
using namespace fplab::sim;
using fplab::test::arithmetic_of;

namespace {

// Every reducer, groupings that split K, shuffles, fused(N,F) tensor-core steps, and every preset.
std::vector<std::string> schedule_families() {
  std::vector<std::string> s = {"all:seq",
                                "all:rev",
                                "all:tree",
                                "all:shfl_down",
                                "all:shfl_up",
                                "all:shfl_xor",
                                "all:atomic",
                                "all:ring",
                                "all:kahan",
                                "all:neumaier",
                                "all:exact",
                                "all:binned",
                                "all:numpy_pairwise",
                                "all:fused(4,23)",
                                "all:fused(64,48)",
                                "shuffle | all:exact",
                                "strided(32):seq | all:shfl_down",
                                "contig(5):seq | all:tree",
                                "split(5):kahan | all:atomic",
                                "contig(16):exact | all:binned",
                                "split(16):fused(8,25) | all:seq",
                                "shuffle | contig(4):shfl_up | strided(3):numpy_pairwise | all:neumaier"};
  for (const auto& p : presets()) s.push_back(p.example);
  return s;
}

}  // namespace

TEST_CASE("gemm with K = 0 writes +0 to every output, as the reference's empty dot product, on every path") {
  const Arithmetic arithmetics[] = {
      arithmetic_of(fp::fp32(), fp::Mode::rne, Products::fused),    // FMA chains for seq first stages
      arithmetic_of(fp::fp32(), fp::Mode::rne, Products::rounded),  // rounded products
      arithmetic_of(fp::fp32(), fp::Mode::rne, Products::exact),    // the exact GEMM for all:exact
      arithmetic_of(fp::fp64(), fp::Mode::rne, Products::fused),    // native double product terms
      arithmetic_of(fp::bf16(), fp::Mode::sr, Products::fused),     // emulated, stochastic rounding
      arithmetic_of(fp::fp16(), fp::Mode::rz, Products::rounded)};
  // One output, a full 4 x 64 tile, partial tiles in both directions, several column blocks
  // (which packs B for the FMA chains).
  const GemmShape shapes[] = {{1, 1, 0}, {4, 64, 0}, {5, 70, 0}, {9, 130, 0}};
  const NoiseKey key{5, 1, 2};
  for (const std::string& text : schedule_families()) {
    const Schedule s = parse_schedule(text);
    for (const Arithmetic& ar : arithmetics) {
      for (const GemmShape& sh : shapes) {
        // C starts as NaN so that an output the GEMM forgets to write shows.
        std::vector<float> c(sh.m * sh.n, NAN);
        bool engine_threw = false, reference_threw = false;
        try {
          gemm(s, nullptr, nullptr, c.data(), sh, ar, key);  // A is m x 0, B is 0 x n: no data at all
        } catch (const std::invalid_argument&) {
          engine_threw = true;
        }
        double expected = 0;
        try {
          expected = dot_reference(s, {}, {}, ar, gemm_output_key(key, 0, 0, sh.n));
        } catch (const std::invalid_argument&) {
          reference_threw = true;
        }
        INFO(text << " " << ar.to_string() << " shape " << sh.m << "x" << sh.n << "x0");
        REQUIRE(engine_threw == reference_threw);
        REQUIRE_FALSE(engine_threw);
        REQUIRE(std::bit_cast<uint64_t>(expected) == 0);  // the reference's empty sum is +0
        for (size_t i = 0; i < sh.m * sh.n; ++i) {
          INFO("output " << i);
          REQUIRE(std::bit_cast<uint32_t>(c[i]) == 0u);
        }
      }
    }
  }
}
