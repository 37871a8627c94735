#include "fp/format.hpp"
#include "fp/exact_value.hpp"
#include "fp/ieee_bits.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <optional>

namespace fplab::fp {
namespace {

Format make(std::string name, int exp_bits, int man_bits, Family family = Family::ieee, int bias_shift = 0) {
  return Format{std::move(name), exp_bits, man_bits, family, bias_shift};
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
Format e4m3() { return make("e4m3", 4, 3, Family::fn); }
Format e5m2() { return make("e5m2", 5, 2); }
Format e4m3ieee() { return make("e4m3ieee", 4, 3); }
Format e4m3fnuz() { return make("e4m3fnuz", 4, 3, Family::fnuz, 1); }
Format e5m2fnuz() { return make("e5m2fnuz", 5, 2, Family::fnuz, 1); }
Format e4m3b11fnuz() { return make("e4m3b11fnuz", 4, 3, Family::fnuz, 4); }
Format e3m2fn() { return make("e3m2fn", 3, 2, Family::finite); }
Format e2m3fn() { return make("e2m3fn", 2, 3, Family::finite); }
Format e2m1fn() { return make("e2m1fn", 2, 1, Family::finite); }
Format e8m0() { return make("e8m0", 8, 0, Family::exponent); }

namespace {

struct NamedFormat {
  Format (*make)();
  std::vector<std::string_view> aliases;  // lower case; the canonical name is make().name
};

// Every fixed format with the other names it goes by: fplab's own short forms and the names
// ml_dtypes (and through it JAX and PyTorch) gives the same bits. "float8_e4m3" is ml_dtypes'
// IEEE-style e4m3, not fplab's "e4m3" (the OCP FN one): each name means what its library means.
const std::vector<NamedFormat>& named_table() {
  static const std::vector<NamedFormat> table = {
      {fp64, {"double", "f64", "float64"}},
      {fp32, {"float", "f32", "float32"}},
      {tf32, {}},
      {bf16, {"bfloat16"}},
      {fp16, {"half", "f16", "float16"}},
      {e4m3, {"fp8e4m3", "fp8-e4m3", "e4m3fn", "float8_e4m3fn"}},
      {e5m2, {"fp8e5m2", "fp8-e5m2", "float8_e5m2"}},
      {e4m3ieee, {"float8_e4m3"}},
      {e4m3fnuz, {"float8_e4m3fnuz"}},
      {e5m2fnuz, {"float8_e5m2fnuz"}},
      {e4m3b11fnuz, {"float8_e4m3b11fnuz"}},
      {e3m2fn, {"fp6_e3m2", "float6_e3m2fn"}},
      {e2m3fn, {"fp6_e2m3", "float6_e2m3fn"}},
      {e2m1fn, {"fp4_e2m1", "float4_e2m1fn"}},
      {e8m0, {"e8m0fnu", "float8_e8m0fnu"}},
  };
  return table;
}

// [floatN_]eXmY[bB][fn|fnuz]: any layout of the families above. The suffixes mean what they mean
// in ml_dtypes' names, generalised: fn has no infinities, and its all-ones pattern S.1..1.1..1 is
// NaN in 8 bits and more, while narrower fn formats have no NaN either (as float6_e3m2fn,
// float6_e2m3fn and float4_e2m1fn); fnuz has no infinities and no -0, the "-0" pattern being its
// one NaN, and its bias is IEEE's plus one unless bB names it. A spelling of a named format returns
// the named format.
std::optional<Format> parse_custom_format(const std::string& name, std::string_view text) {
  std::string_view rest = name;
  int declared_width = 0;
  if (rest.starts_with("float")) {
    const auto underscore = rest.find('_');
    if (underscore == std::string_view::npos) return std::nullopt;
    auto [end, ec] = std::from_chars(rest.data() + 5, rest.data() + underscore, declared_width);
    if (ec != std::errc{} || end != rest.data() + underscore) return std::nullopt;
    rest.remove_prefix(underscore + 1);
  }
  // A number after `letter`, or nullopt when `letter` does not come next.
  auto number_after = [&rest](char letter) -> std::optional<int> {
    if (rest.empty() || rest.front() != letter) return std::nullopt;
    int value = 0;
    auto [end, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), value);
    if (ec != std::errc{}) return std::nullopt;
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    return value;
  };
  const std::optional<int> e = number_after('e');
  const std::optional<int> m = e ? number_after('m') : std::nullopt;
  if (!m) return std::nullopt;
  const std::optional<int> bias = number_after('b');
  Family family;
  if (rest.empty())
    family = Family::ieee;
  else if (rest == "fn")
    family = Family::fn;
  else if (rest == "fnuz")
    family = Family::fnuz;
  else
    return std::nullopt;
  const std::string quoted = "format '" + std::string(text) + "': ";
  if (*e < 2 || *e > 11) throw FormatError(quoted + "exponent bits must be 2..11, got " + std::to_string(*e));
  if (*m < 1 || *m > 52) throw FormatError(quoted + "mantissa bits must be 1..52, got " + std::to_string(*m));
  if (family == Family::fn && 1 + *e + *m < 8) family = Family::finite;
  Format f = make("", *e, *m, family, family == Family::fnuz ? 1 : 0);
  if (declared_width != 0 && declared_width != f.width())
    throw FormatError(quoted + "float" + std::to_string(declared_width) + " but e" + std::to_string(*e) + "m" +
                      std::to_string(*m) + " takes " + std::to_string(f.width()) + " bits");
  if (bias) {
    f.bias_shift = *bias - ((1 << (*e - 1)) - 1);
    // Every value must stay a double (the assumption fp/ rests on).
    if (f.emax() > 1023 || f.emin() - f.man_bits < -1074)
      throw FormatError(quoted + "bias " + std::to_string(*bias) + " puts values outside the range of a double");
  }
  // A named format's layout returns that format, except that the IEEE-like e8m7 and e8m10 keep
  // their own names (bf16 and tf32 are how a program stores them, not only a grid).
  for (const NamedFormat& entry : named_table())
    if (Format named = entry.make(); named == f && named != bf16() && named != tf32()) return named;
  const bool default_bias = f.bias_shift == (family == Family::fnuz ? 1 : 0);
  f.name = "e" + std::to_string(*e) + "m" + std::to_string(*m) + (default_bias ? "" : "b" + std::to_string(*bias)) +
           (family == Family::ieee   ? ""
            : family == Family::fnuz ? "fnuz"
                                     : "fn");
  return f;
}

}  // namespace

std::vector<std::string> named_formats() {
  std::vector<std::string> names;
  for (const NamedFormat& entry : named_table()) names.push_back(entry.make().name);
  return names;
}

Format parse_format(std::string_view text) {
  const std::string name = lower(text);
  for (const NamedFormat& entry : named_table()) {
    Format f = entry.make();
    if (name == f.name) return f;
    for (std::string_view alias : entry.aliases)
      if (name == alias) return f;
  }
  if (auto custom = parse_custom_format(name, text)) return *custom;
  std::string known;
  for (const auto& n : named_formats()) known += (known.empty() ? "" : ", ") + n;
  throw FormatError(
      "unknown format '" + std::string(text) + "' (known: " + known +
      ", their ml_dtypes names such as float8_e4m3fnuz, or eXmY[bBIAS][fn|fnuz] such as e5m10 or e3m4fn)");
}

double Format::max_finite() const {
  // Largest significand: all ones, or all ones but the last bit where that pattern is NaN (fn).
  const double top = family == Family::fn ? 2.0 - std::ldexp(1.0, 1 - man_bits) : 2.0 - std::ldexp(1.0, -man_bits);
  return std::ldexp(top, emax());
}
double Format::min_normal() const { return std::ldexp(1.0, emin()); }
double Format::min_subnormal() const { return std::ldexp(1.0, emin() - man_bits); }

double Format::ulp(double x) const {
  x = std::fabs(x);
  if (x < min_normal()) return min_subnormal();
  return std::ldexp(1.0, std::ilogb(x) - man_bits);
}

namespace {

uint64_t sign_of(const Format& f, bool negative) {
  return f.is_signed() && negative ? uint64_t{1} << (f.exp_bits + f.man_bits) : 0;
}

}  // namespace

double Format::decode(uint64_t bits) const {
  bits &= mask(width());
  const bool negative = is_signed() && ((bits >> (exp_bits + man_bits)) & 1);
  const uint64_t biased = (bits >> man_bits) & mask(exp_bits);
  const uint64_t fraction = bits & mask(man_bits);
  const uint64_t all_ones = mask(exp_bits);
  double magnitude;
  switch (family) {
    case Family::ieee:
      if (biased == all_ones && fraction == 0) return negative ? -INFINITY : INFINITY;
      if (biased == all_ones) {
        // The double NaN a widening conversion gives: quiet, the fraction's bits leading its own.
        const uint64_t quiet = uint64_t{1} << (binary64::kFractionBits - 1);
        const uint64_t wide = fraction << (binary64::kFractionBits - man_bits);
        return std::bit_cast<double>((uint64_t{negative} << 63) | binary64::kInfinityBits | quiet | wide);
      }
      break;
    case Family::fn:
      if (biased == all_ones && fraction == mask(man_bits)) return std::copysign(NAN, negative ? -1.0 : 1.0);
      break;
    case Family::fnuz:
      if (negative && biased == 0 && fraction == 0) return NAN;  // the one NaN: the "-0" pattern
      break;
    case Family::exponent:
      if (biased == all_ones) return NAN;
      return std::ldexp(1.0, static_cast<int>(biased) - bias());
    case Family::finite:
      break;
  }
  if (biased == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), emin() - man_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(fraction | (uint64_t{1} << man_bits)),
                           static_cast<int>(biased) - bias() - man_bits);
  }
  return negative ? -magnitude : magnitude;
}

uint64_t Format::nan_bits(bool negative, uint64_t payload) const {
  switch (family) {
    case Family::ieee: {
      const int payload_bits = man_bits - 1;
      const uint64_t kept = payload_bits == 0 ? 0 : payload >> (64 - payload_bits);
      return sign_of(*this, negative) | (mask(exp_bits) << man_bits) | (uint64_t{1} << (man_bits - 1)) | kept;
    }
    case Family::fn:
      return sign_of(*this, negative) | (mask(exp_bits) << man_bits) | mask(man_bits);
    case Family::fnuz:
      return uint64_t{1} << (exp_bits + man_bits);
    case Family::exponent:
      return mask(exp_bits);
    case Family::finite:
      break;
  }
  throw FormatError("format " + name + " has no NaN");
}

uint64_t Format::infinity_bits(bool negative) const {
  if (!has_infinity()) throw FormatError("format " + name + " has no infinities");
  return sign_of(*this, negative) | (mask(exp_bits) << man_bits);
}

uint64_t Format::max_finite_bits(bool negative) const {
  const uint64_t sign = sign_of(*this, negative);
  switch (family) {
    case Family::ieee:
      return sign | ((mask(exp_bits) - 1) << man_bits) | mask(man_bits);
    case Family::fn:
      return sign | (mask(exp_bits) << man_bits) | (mask(man_bits) - 1);
    case Family::exponent:
      return mask(exp_bits) - 1;
    case Family::fnuz:
    case Family::finite:
      break;
  }
  return sign | (mask(exp_bits) << man_bits) | mask(man_bits);
}

uint64_t Format::zero_bits(bool negative) const {
  if (!has_zero()) throw FormatError("format " + name + " has no zero");
  return has_negative_zero() ? sign_of(*this, negative) : 0;
}

uint64_t Format::min_value_bits() const {
  if (has_zero()) throw FormatError("format " + name + " has a zero: its least magnitude is 0");
  return 0;
}

uint64_t Format::encode(double value) const {
  const bool negative = std::signbit(value);
  if (std::isnan(value)) return nan_bits(negative, ExactValue::from_double(value).significand);
  if (std::isinf(value)) return infinity_bits(negative);
  const double magnitude = std::fabs(value);
  if (magnitude == 0) {
    if (negative && has_zero() && !has_negative_zero()) throw FormatError("format " + name + " has no -0");
    return zero_bits(negative);
  }
  if (negative && !is_signed()) throw FormatError("format " + name + " has no negative values");
  if (magnitude > max_finite()) throw FormatError("value out of range of format " + name);
  if (!has_subnormals() && magnitude < min_normal()) throw FormatError("value below the range of format " + name);
  const uint64_t sign = sign_of(*this, negative);
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
