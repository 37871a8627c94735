// fp::cuda_rsqrt against the GPU it emulates and against MPFR:
// - every one of 8192 floats the H200's rsqrtf was asked (normals of every binade, subnormals,
//   zeros, infinities, NaN, negatives: tests/data/cuda_rsqrt_h200_samples.bin, written on the
//   device by experiments/gpu_rsqrt_table.py samples) gives the device's bits;
// - the table's reference, the correctly rounded rsqrt, is MPFR's mpfr_rec_sqrt on seeded floats of
//   every binade and on the significands whose result lies nearest a float32 midpoint;
// - the embedded table is the one measured: its histogram.
#include <mpfr.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <vector>

#include "fp/cuda_rsqrt.hpp"

using fplab::fp::cuda_rsqrt;
using fplab::fp::cuda_rsqrt_delta;
using fplab::fp::rsqrt_correctly_rounded;

namespace {

float mpfr_rsqrt(float x) {
  mpfr_t v;
  mpfr_init2(v, 24);
  mpfr_set_flt(v, x, MPFR_RNDN);
  mpfr_rec_sqrt(v, v, MPFR_RNDN);  // 24 bits, one rounding: the results of finite x > 0 are normal
  const float y = mpfr_get_flt(v, MPFR_RNDN);
  mpfr_clear(v);
  return y;
}

}  // namespace

TEST_CASE("cuda_rsqrt gives the H200's bits on the device's samples", "[cuda_rsqrt]") {
  std::ifstream file(FPLAB_SOURCE_DIR "/tests/data/cuda_rsqrt_h200_samples.bin", std::ios::binary);
  REQUIRE(file);
  std::vector<uint32_t> pairs(2 * 8192);
  file.read(reinterpret_cast<char*>(pairs.data()), static_cast<std::streamsize>(pairs.size() * 4));
  REQUIRE(file.gcount() == static_cast<std::streamsize>(pairs.size() * 4));
  size_t subnormals = 0, specials = 0, wrong = 0;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    const float x = std::bit_cast<float>(pairs[i]), device = std::bit_cast<float>(pairs[i + 1]);
    const float ours = cuda_rsqrt(x);
    subnormals += std::fpclassify(x) == FP_SUBNORMAL;
    specials += !std::isfinite(x) || x <= 0;
    const bool same = std::isnan(device) ? std::isnan(ours) : std::bit_cast<uint32_t>(ours) == pairs[i + 1];
    if (!same && ++wrong <= 5) UNSCOPED_INFO("x = " << x << ": device " << device << ", cuda_rsqrt " << ours);
  }
  CHECK(wrong == 0);
  CHECK(subnormals >= 1000);  // the samples do reach the normalisation of subnormals
  CHECK(specials >= 5);
}

TEST_CASE("The correctly rounded rsqrt is MPFR's", "[cuda_rsqrt]") {
  std::mt19937_64 rng(41);
  size_t wrong = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng() % 0x7F7FFFFF) + 1;  // every positive finite float
    const float x = std::bit_cast<float>(bits);
    wrong += std::bit_cast<uint32_t>(rsqrt_correctly_rounded(x)) != std::bit_cast<uint32_t>(mpfr_rsqrt(x));
  }
  CHECK(wrong == 0);
  // The significands of [1, 4) whose float64 1/sqrt lies nearest a float32 midpoint: the exact path.
  std::vector<std::pair<double, float>> nearest;
  for (uint32_t bits = 0x3F800000; bits < 0x3F800000 + (1u << 24); bits += 7) {
    const float m = std::bit_cast<float>(bits);
    const double r = 1.0 / std::sqrt(static_cast<double>(m));
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(r)) - 23);
    const double offset = std::abs(std::fmod(r, ulp) / ulp - 0.5);
    if (offset < 1e-5) nearest.emplace_back(offset, m);
  }
  REQUIRE(nearest.size() >= 20);
  for (const auto& [offset, m] : nearest)
    CHECK(std::bit_cast<uint32_t>(rsqrt_correctly_rounded(m)) == std::bit_cast<uint32_t>(mpfr_rsqrt(m)));
}

TEST_CASE("The embedded table is the H200's measured one", "[cuda_rsqrt]") {
  std::array<size_t, 4> count{};
  for (uint32_t i = 0; i < (1u << 24); ++i) ++count[static_cast<size_t>(cuda_rsqrt_delta(i) + 2)];
  CHECK(count == std::array<size_t, 4>{8, 2344391, 13143086, 1289731});  // -2, -1, 0, +1 ulp
  CHECK(cuda_rsqrt(1.0f) == 1.0f);
  CHECK(std::isinf(cuda_rsqrt(0.0f)));
  CHECK(std::signbit(cuda_rsqrt(-0.0f)));
  CHECK(cuda_rsqrt(INFINITY) == 0.0f);
  CHECK(std::isnan(cuda_rsqrt(-1.0f)));
}
