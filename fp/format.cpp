#include "fp/format.hpp"

#include <bit>
#include <charconv>
#include <cmath>

namespace fplab::fp {
namespace {

Format make(std::string name, int exp_bits, int man_bits, bool finite_only = false) {
  return Format{std::move(name), exp_bits, man_bits, finite_only};
}

uint64_t mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Format fp64() { return make("fp64", 11, 52); }
Format fp32() { return make("fp32", 8, 23); }
Format tf32() { return make("tf32", 8, 10); }
Format bf16() { return make("bf16", 8, 7); }
Format fp16() { return make("fp16", 5, 10); }
Format e4m3() { return make("e4m3", 4, 3, true); }
Format e5m2() { return make("e5m2", 5, 2); }

std::vector<std::string> named_formats() { return {"fp64", "fp32", "tf32", "bf16", "fp16", "e4m3", "e5m2"}; }

Format parse_format(std::string_view text) {
  const std::string name = lower(text);
  if (name == "fp64" || name == "double" || name == "f64") return fp64();
  if (name == "fp32" || name == "float" || name == "f32") return fp32();
  if (name == "tf32") return tf32();
  if (name == "bf16" || name == "bfloat16") return bf16();
  if (name == "fp16" || name == "half" || name == "f16") return fp16();
  if (name == "e4m3" || name == "fp8e4m3" || name == "fp8-e4m3" || name == "e4m3fn") return e4m3();
  if (name == "e5m2" || name == "fp8e5m2" || name == "fp8-e5m2") return e5m2();
  // Custom eXmY.
  const auto m_pos = name.find('m');
  if (name.size() >= 4 && name[0] == 'e' && m_pos != std::string::npos) {
    int e = 0, m = 0;
    const char* first = name.data();
    auto [p1, ec1] = std::from_chars(first + 1, first + m_pos, e);
    auto [p2, ec2] = std::from_chars(first + m_pos + 1, first + name.size(), m);
    if (ec1 == std::errc{} && ec2 == std::errc{} && p1 == first + m_pos && p2 == first + name.size()) {
      if (e < 2 || e > 11)
        throw FormatError("format '" + std::string(text) + "': exponent bits must be 2..11, got " + std::to_string(e));
      if (m < 1 || m > 52)
        throw FormatError("format '" + std::string(text) + "': mantissa bits must be 1..52, got " + std::to_string(m));
      // Canonical names for the custom spellings of the IEEE-like named formats.
      for (const Format& f : {fp64(), fp32(), fp16(), e5m2()})
        if (f.exp_bits == e && f.man_bits == m) return f;
      return make("e" + std::to_string(e) + "m" + std::to_string(m), e, m);
    }
  }
  std::string known;
  for (const auto& n : named_formats()) known += (known.empty() ? "" : ", ") + n;
  throw FormatError("unknown format '" + std::string(text) + "' (known: " + known + ", or eXmY such as e5m10)");
}

double Format::max_finite() const {
  // Largest significand: all ones, or all ones but the last bit where that pattern is NaN.
  const double top = finite_only ? 2.0 - std::ldexp(1.0, 1 - man_bits) : 2.0 - std::ldexp(1.0, -man_bits);
  return std::ldexp(top, emax());
}
double Format::min_normal() const { return std::ldexp(1.0, emin()); }
double Format::min_subnormal() const { return std::ldexp(1.0, emin() - man_bits); }

double Format::ulp(double x) const {
  x = std::fabs(x);
  if (x < min_normal()) return min_subnormal();
  return std::ldexp(1.0, std::ilogb(x) - man_bits);
}

double Format::decode(uint64_t bits) const {
  bits &= mask(width());
  const bool negative = (bits >> (exp_bits + man_bits)) & 1;
  const uint64_t biased = (bits >> man_bits) & mask(exp_bits);
  const uint64_t fraction = bits & mask(man_bits);
  const uint64_t all_ones = mask(exp_bits);
  double magnitude;
  if (biased == all_ones && !finite_only) {
    magnitude = fraction == 0 ? INFINITY : NAN;
  } else if (biased == all_ones && finite_only && fraction == mask(man_bits)) {
    magnitude = NAN;
  } else if (biased == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), emin() - man_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(fraction | (uint64_t{1} << man_bits)),
                           static_cast<int>(biased) - bias() - man_bits);
  }
  return negative ? -magnitude : magnitude;
}

uint64_t Format::quiet_nan_bits(bool negative) const {
  const uint64_t sign = uint64_t{negative} << (exp_bits + man_bits);
  const uint64_t exponent = mask(exp_bits) << man_bits;
  const uint64_t fraction = finite_only ? mask(man_bits) : uint64_t{1} << (man_bits - 1);
  return sign | exponent | fraction;
}

uint64_t Format::infinity_bits(bool negative) const {
  if (finite_only) throw FormatError("format " + name + " has no infinities");
  return (uint64_t{negative} << (exp_bits + man_bits)) | (mask(exp_bits) << man_bits);
}

uint64_t Format::max_finite_bits(bool negative) const {
  const uint64_t sign = uint64_t{negative} << (exp_bits + man_bits);
  if (finite_only) return sign | (mask(exp_bits) << man_bits) | (mask(man_bits) - 1);
  return sign | ((mask(exp_bits) - 1) << man_bits) | mask(man_bits);
}

uint64_t Format::encode(double value) const {
  const bool negative = std::signbit(value);
  if (std::isnan(value)) return quiet_nan_bits(negative);
  if (std::isinf(value)) return infinity_bits(negative);
  const uint64_t sign = uint64_t{negative} << (exp_bits + man_bits);
  const double magnitude = std::fabs(value);
  if (magnitude == 0) return sign;
  if (magnitude > max_finite()) throw FormatError("value out of range of format " + name);
  uint64_t biased, fraction;
  if (magnitude < min_normal()) {
    biased = 0;
    const double k = std::ldexp(magnitude, man_bits - emin());
    fraction = static_cast<uint64_t>(k);
    if (static_cast<double>(fraction) != k) throw FormatError("value is not a " + name + " number");
  } else {
    const int e = std::ilogb(magnitude);
    const double significand = std::ldexp(magnitude, man_bits - e);
    const auto m = static_cast<uint64_t>(significand);
    if (static_cast<double>(m) != significand) throw FormatError("value is not a " + name + " number");
    biased = static_cast<uint64_t>(e + bias());
    fraction = m & mask(man_bits);
  }
  return sign | (biased << man_bits) | fraction;
}

}  // namespace fplab::fp
