// OCP MX block scaling (fp/mx_block.hpp): hand-worked blocks, then seeded random blocks in every
// element format and deterministic mode against the independent MPFR quantizer of
// tests/mx_reference.hpp. gfloat's own block encoding is the other referee: test_mx_gfloat_oracle.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "fp/mx_block.hpp"
#include "tests/harness.hpp"
#include "tests/mx_reference.hpp"

using namespace fplab;
using fp::Mode;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

std::vector<fp::Format> element_formats() { return {fp::e4m3(), fp::e5m2(), fp::e3m2fn(), fp::e2m3fn(), fp::e2m1fn()}; }

}  // namespace

TEST_CASE("mx: hand-worked blocks") {
  SECTION("e2m1fn, scale 1: 6 stays, -0.3 goes to the nearer -0.5") {
    const auto q = fp::mx_quantize(std::vector<double>{6.0, 1.0, -0.3, 0.0}, fp::e2m1fn(), 4);
    CHECK(q.scale_bits == std::vector<uint8_t>{127});  // floor(log2 6) - 2 = 0
    CHECK(q.element_bits == std::vector<uint64_t>{0x7, 0x2, 0x9, 0x0});
    CHECK(q.dequantized == std::vector<double>{6.0, 1.0, -0.5, 0.0});
  }
  SECTION("e4m3: 1000 / 2 = 500 rounds to 512 and saturates to 448; 0.01 / 2 is a subnormal") {
    const auto q = fp::mx_quantize(std::vector<double>{1000, 1, 0.01}, fp::e4m3());
    CHECK(q.scale_bits == std::vector<uint8_t>{128});  // floor(log2 1000) - 8 = 1
    CHECK(q.element_bits == std::vector<uint64_t>{0x7e, 0x30, 0x03});
    CHECK(q.dequantized == std::vector<double>{896, 1, 3 * 0x1p-9 * 2});
  }
  SECTION("an all-zero block takes the least scale; -0 keeps its sign") {
    const auto q = fp::mx_quantize(std::vector<double>{0.0, -0.0}, fp::e4m3());
    CHECK(q.scale_bits == std::vector<uint8_t>{0});
    CHECK(q.element_bits == std::vector<uint64_t>{0x00, 0x80});
    CHECK(std::signbit(q.dequantized[1]));
  }
  SECTION("a NaN makes the scale NaN and every value of the block NaN; the next block is its own") {
    std::vector<double> v(33, 1.0);
    v[3] = kNan;
    const auto q = fp::mx_quantize(v, fp::e2m1fn());
    CHECK(q.scale_bits == std::vector<uint8_t>{0xff, 127 - 2});
    CHECK(q.element_bits[0] == 0);  // FP4 has no NaN: +0, carrying nothing
    for (size_t i = 0; i < 32; ++i) CHECK(std::isnan(q.dequantized[i]));
    CHECK(q.dequantized[32] == 1.0);
  }
  SECTION("an infinity: scale 2^127, the infinity saturates to +-max, the rest fall to zero") {
    const auto q = fp::mx_quantize(std::vector<double>{-kInf, 1.0}, fp::e5m2());
    CHECK(q.scale_bits == std::vector<uint8_t>{254});
    CHECK(q.element_bits == std::vector<uint64_t>{0xfb, 0x00});
    CHECK(q.dequantized[0] == -57344 * 0x1p127);
  }
  SECTION("the scale clamps at 2^-127 (tiny blocks) and 2^127 (huge doubles)") {
    const auto tiny = fp::mx_quantize(std::vector<double>{0x1p-140}, fp::e4m3());
    CHECK(tiny.scale_bits == std::vector<uint8_t>{0});    // -140 - 8 clamps to -127
    CHECK(tiny.dequantized == std::vector<double>{0.0});  // 2^-13 is below e4m3's 2^-9 / 2
    CHECK(fp::mx_quantize(std::vector<double>{0x1p-140}, fp::e4m3(), 32, Mode::ru).dequantized ==
          std::vector<double>{0x1p-136});
    const auto huge = fp::mx_quantize(std::vector<double>{0x1p200, 1.0}, fp::e2m1fn());
    CHECK(huge.scale_bits == std::vector<uint8_t>{254});
    CHECK(huge.dequantized[0] == 6 * 0x1p127);  // 2^73 saturates to 6
  }
  SECTION("blocks of any size, the last one shorter") {
    std::vector<double> v(70);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
    const auto q = fp::mx_quantize(v, fp::e5m2(), 32);
    CHECK(q.scale_bits == std::vector<uint8_t>{127 + 5 - 15, 127 + 6 - 15, 127 + 6 - 15});
    CHECK(fp::mx_quantize(v, fp::e5m2(), 7).scale_bits.size() == 10);
  }
  SECTION("bad input: one line") {
    const std::vector<double> v{1.0};
    CHECK_THROWS_WITH(fp::mx_quantize(v, fp::e4m3(), 0), "MX block size must be at least 1");
    CHECK_THROWS_AS(fp::mx_quantize(v, fp::e8m0()), fp::FormatError);
    CHECK_THROWS_AS(fp::mx_quantize(v, fp::fp64()), fp::FormatError);
    CHECK_THROWS_AS(fp::mx_quantize(v, fp::e4m3(), 32, Mode::sr), std::logic_error);  // sr needs a stream
  }
}

TEST_CASE("mx: every element is round(v / X) by the MPFR reference, seeded random blocks, 5 formats x 6 modes") {
  std::mt19937_64 g(19);
  std::normal_distribution<double> normal;
  test::MismatchLog log("mx_quantize vs the MPFR quantizer");
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t block = trial % 5 == 0 ? 1 + g() % 40 : 32;
    std::vector<double> v(1 + g() % 100);
    const int spread = static_cast<int>(g() % 40);  // binades between a block's values
    const int centre = static_cast<int>(g() % 400) - 200;
    for (double& x : v) {
      const uint64_t kind = g() % 100;
      x = kind < 8 ? 0.0 : kind < 9 ? -0.0 : std::ldexp(normal(g), centre + static_cast<int>(g() % (spread + 1)));
      if (kind == 99 && trial % 3 == 0) x = g() % 2 ? kInf : -kInf;
      if (kind == 98 && trial % 7 == 0) x = kNan;
      if (trial % 11 == 0) x = static_cast<float>(x);
    }
    for (const fp::Format& element : element_formats())
      for (Mode mode : test::deterministic_modes) {
        const fp::MxBlocks got = fp::mx_quantize(v, element, block, mode);
        for (size_t first = 0, b = 0; first < v.size(); first += block, ++b) {
          const size_t len = std::min(block, v.size() - first);
          const auto want = test::mx_reference_block(std::span(v).subspan(first, len), element, mode);
          auto where = [&] {
            std::ostringstream s;
            s << element.name << " " << test::mode_text(mode) << " block " << b << " of size " << len << " (trial "
              << trial << ")";
            return s.str();
          };
          if (!want.scale) {
            if (got.scale_bits[b] != 0xff) log.fail(where() + ": the scale should be NaN");
            for (size_t i = 0; i < len; ++i)
              if (!std::isnan(got.dequantized[first + i])) log.fail(where() + ": a value should be NaN");
            log.pass();
            continue;
          }
          if (got.scale_bits[b] != *want.scale + 127) {
            log.fail(where() + ": scale bits " + std::to_string(got.scale_bits[b]) + ", want " +
                     std::to_string(*want.scale + 127));
            continue;
          }
          for (size_t i = 0; i < len; ++i) {
            const size_t at = first + i;
            if (got.element_bits[at] != want.element_bits[i] || got.elements[at] != want.elements[i] ||
                !test::same_double(got.dequantized[at], want.dequantized[i]))
              log.fail(where() + ", element " + std::to_string(i) + " = " + test::show(v[at]) + ": got " +
                       test::show_bits(got.element_bits[at]) + ", want " + test::show_bits(want.element_bits[i]));
            else
              log.pass();
          }
        }
      }
  }
  log.require_none();
}

TEST_CASE("mx: stochastic rounding picks one of the two neighbours of v / X, from the stream given") {
  std::mt19937_64 g(7);
  std::normal_distribution<double> normal;
  std::vector<double> v(256);
  for (double& x : v) x = normal(g);
  fp::CounterRng stream(42), again(42);
  const auto q = fp::mx_quantize(v, fp::e2m1fn(), 32, Mode::sr, &stream);
  CHECK(fp::mx_quantize(v, fp::e2m1fn(), 32, Mode::sr, &again).element_bits == q.element_bits);
  const auto down = fp::mx_quantize(v, fp::e2m1fn(), 32, Mode::rd), up = fp::mx_quantize(v, fp::e2m1fn(), 32, Mode::ru);
  size_t ups = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    CHECK((q.dequantized[i] == down.dequantized[i] || q.dequantized[i] == up.dequantized[i]));
    ups += q.dequantized[i] != down.dequantized[i];
  }
  CHECK(ups > 0);
  CHECK(ups < v.size());
}
