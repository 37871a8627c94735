// libFuzzer target for numbers as people type them (fp/number_text.hpp): decimal, hex-float,
// inf, nan, with any exponent. Properties, each a differential check:
// - parse_number and parse_double accept the same texts (parse_number may also refuse a nonzero
//   number too small for its exponent range, "too small to represent");
// - parse_number's 64 bits and sticky bit, rounded once to fp64 (round_exact), give exactly
//   MPFR's own nearest double (parse_double): the premise of rounding a typed number once;
// - format_double (shortest decimal) and format_hex read back as the same double;
// - an accepted text has no NUL byte (MPFR stops reading at one; the rest must not be ignored);
// - nothing but fp::FormatError ever escapes, and its message is one line.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fp/format.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"

namespace {

bool same(double x, double y) {
  return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y) || (std::isnan(x) && std::isnan(y));
}

void check(bool property) {
  if (!property) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  using namespace fplab::fp;
  ExactValue exact;
  bool exact_ok = true, too_small = false;
  try {
    exact = parse_number(text);
  } catch (const FormatError& e) {
    const std::string message = e.what();
    check(message.find('\n') == std::string::npos || text.find('\n') != std::string::npos);
    exact_ok = false;
    too_small = message.find("too small to represent") != std::string::npos;
  }
  double value = 0;
  bool double_ok = true;
  try {
    value = parse_double(text);
  } catch (const FormatError&) {
    double_ok = false;
  }
  check(exact_ok == double_ok || (too_small && double_ok));
  if (!double_ok) return 0;
  check(text.find('\0') == std::string::npos);  // no number has a NUL in it: nothing was cut off
  if (exact_ok)
    check(same(round_exact(exact, fp64(), {}).value, value));
  else
    check(value == 0);  // too small: MPFR's nearest double is a zero as well
  check(same(parse_double(format_double(value)), value));
  check(same(parse_double(format_hex(value)), value));
  return 0;
}
