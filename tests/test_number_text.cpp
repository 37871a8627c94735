// Numbers as people type them (fp/number_text.hpp), on the texts the fuzzer (tests/fuzz/
// fuzz_number_text.cpp) starts from and the ones it found: extreme exponents, NaN payload
// syntax, and NUL bytes, which MPFR stops reading at.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "fp/format.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"

using namespace fplab::fp;

TEST_CASE("parse_number: extreme exponents stay exact, and round once to the right double") {
  // 2^-1075 is half the smallest subnormal: exact as typed, a tie that rounds to even (+0).
  const ExactValue half_ulp = parse_number("0x1p-1075");
  CHECK(half_ulp.kind == ExactValue::Kind::finite);
  CHECK_FALSE(half_ulp.sticky);
  CHECK(std::bit_cast<uint64_t>(round_exact(half_ulp, fp64(), {}).value) == 0);
  CHECK(parse_double("0x1p-1075") == 0);
  CHECK(parse_double("0x1.0000000000001p-1075") == std::numeric_limits<double>::denorm_min());
  // 10^999999 is finite, far past every format: inf to nearest, the largest double toward zero.
  const ExactValue huge = parse_number("1e999999");
  CHECK(huge.kind == ExactValue::Kind::finite);
  CHECK(huge.sticky);
  CHECK(std::isinf(parse_double("1e999999")));
  CHECK(round_exact(huge, fp64(), {Mode::rz}).value == std::numeric_limits<double>::max());
  CHECK(parse_number("-1e-999999").kind == ExactValue::Kind::finite);
  CHECK(parse_number("nan(0x12)").kind == ExactValue::Kind::nan);
  // A subnormal's shortest decimal: rounded to 53 bits first and to the subnormal grid after,
  // it used to read back one ulp off.
  const uint64_t subnormal = 0x800637962a741b55;
  CHECK(std::bit_cast<uint64_t>(parse_double(format_double(std::bit_cast<double>(subnormal)))) == subnormal);
  CHECK(std::bit_cast<uint64_t>(parse_double("-1e-99999999999999999999")) == std::bit_cast<uint64_t>(-0.0));
  CHECK(std::isnan(parse_double("nan(0x12)")));
}

TEST_CASE("parse_number and parse_double refuse text after a NUL byte, and anything but a whole number") {
  using namespace std::string_literals;
  for (const std::string& text :
       {"1\0"s, "1\0junk"s, "\0"s, "0x1p3\0 "s, "1 2"s, "1e"s, "0x"s, ""s, "  "s, "nan(0x12"s}) {
    INFO("text of " << text.size() << " bytes: " << text.c_str());
    CHECK_THROWS_AS(parse_number(text), FormatError);
    CHECK_THROWS_AS(parse_double(text), FormatError);
  }
  CHECK(parse_double(" \t2.5\n") == 2.5);  // surrounding blanks are not part of the number
}

TEST_CASE("format_double and format_hex read back as the same double, for random bit patterns") {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const double x = std::bit_cast<double>(rng());
    if (std::isnan(x)) continue;
    INFO(format_hex(x));
    REQUIRE(std::bit_cast<uint64_t>(parse_double(format_double(x))) == std::bit_cast<uint64_t>(x));
    REQUIRE(std::bit_cast<uint64_t>(parse_double(format_hex(x))) == std::bit_cast<uint64_t>(x));
    REQUIRE(std::bit_cast<uint64_t>(round_exact(parse_number(format_double(x)), fp64(), {}).value) ==
            std::bit_cast<uint64_t>(x));
  }
}
