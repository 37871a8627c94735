#include "harness.hpp"

#include "fp/counter_rng.hpp"

#include <bit>
#include <cmath>
#include <cstdio>
#include <exception>
#include <sstream>

#include <catch2/catch.hpp>

#include "fp/counter_rng.hpp"

namespace fplab::test {

Format format_named(const std::string& name) {
  using fp::Family;
  auto make = [&](int e, int m, Family family, int bias_shift = 0) {
    Format f;
    f.name = name;
    f.exp_bits = e;
    f.man_bits = m;
    f.family = family;
    f.bias_shift = bias_shift;
    return f;
  };
  if (name == "fp64") return make(11, 52, Family::ieee);
  if (name == "fp32") return make(8, 23, Family::ieee);
  if (name == "tf32") return make(8, 10, Family::ieee);
  if (name == "bf16") return make(8, 7, Family::ieee);
  if (name == "fp16") return make(5, 10, Family::ieee);
  if (name == "e4m3") return make(4, 3, Family::fn);
  if (name == "e5m2") return make(5, 2, Family::ieee);
  if (name == "e4m3ieee") return make(4, 3, Family::ieee);
  // ml_dtypes' biases: e4m3fnuz 8, e5m2fnuz 16, e4m3b11fnuz 11.
  if (name == "e4m3fnuz") return make(4, 3, Family::fnuz, 8 - 7);
  if (name == "e5m2fnuz") return make(5, 2, Family::fnuz, 16 - 15);
  if (name == "e4m3b11fnuz") return make(4, 3, Family::fnuz, 11 - 7);
  if (name == "e3m2fn") return make(3, 2, Family::finite);
  if (name == "e2m3fn") return make(2, 3, Family::finite);
  if (name == "e2m1fn") return make(2, 1, Family::finite);
  if (name == "e8m0") return make(8, 0, Family::exponent);
  throw std::invalid_argument("format_named: " + name);
}

std::vector<Format> narrow_ml_formats() {
  std::vector<Format> formats;
  for (const char* name :
       {"e4m3ieee", "e4m3fnuz", "e5m2fnuz", "e4m3b11fnuz", "e3m2fn", "e2m3fn", "e2m1fn", "e8m0"})
    formats.push_back(format_named(name));
  return formats;
}

std::vector<Format> output_formats() {
  std::vector<Format> formats;
  for (const char* name : {"fp64", "fp32", "tf32", "bf16", "fp16", "e4m3", "e5m2"})
    formats.push_back(format_named(name));
  return formats;
}

Format custom_format(int exp_bits, int man_bits, bool finite_only) {
  char name[24];  // snprintf: GCC 12 warns falsely (-Wrestrict) on std::string concatenation
  std::snprintf(name, sizeof name, "e%dm%d%s", exp_bits, man_bits, finite_only ? "fn" : "");
  Format f;
  f.name = name;
  f.exp_bits = exp_bits;
  f.man_bits = man_bits;
  f.family = finite_only ? fp::Family::fn : fp::Family::ieee;
  return f;
}

std::string show(double x) {
  char text[96];
  std::snprintf(text, sizeof text, "%a (%.17g)", x, x);
  return text;
}

std::string show_bits(uint64_t bits) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(bits));
  return text;
}

static const char* kind_name(ref::Kind k) {
  switch (k) {
    case ref::Kind::zero:
      return "zero";
    case ref::Kind::finite:
      return "finite";
    case ref::Kind::infinite:
      return "inf";
    case ref::Kind::nan:
      return "nan";
  }
  return "?";
}

static ref::Kind kind_of(fp::ExactValue::Kind k) {
  switch (k) {
    case fp::ExactValue::Kind::zero:
      return ref::Kind::zero;
    case fp::ExactValue::Kind::finite:
      return ref::Kind::finite;
    case fp::ExactValue::Kind::infinite:
      return ref::Kind::infinite;
    case fp::ExactValue::Kind::nan:
      return ref::Kind::nan;
  }
  return ref::Kind::nan;
}

std::string show(const fp::ExactValue& v) {
  std::ostringstream out;
  out << (v.negative ? "-" : "+") << kind_name(kind_of(v.kind));
  if (v.kind == fp::ExactValue::Kind::finite)
    out << " significand " << show_bits(v.significand) << " exponent " << v.exponent << " sticky " << v.sticky;
  return out.str();
}

std::string show(const ref::Exact& v) {
  std::ostringstream out;
  out << (v.negative ? "-" : "+") << kind_name(v.kind);
  if (v.kind == ref::Kind::finite) {
    const ref::Top64 t = ref::top64(v.value.get());
    out << " significand " << show_bits(t.significand) << " exponent " << t.exponent << " sticky " << t.sticky;
  }
  return out.str();
}

std::string mode_text(Mode mode) { return std::string(fp::mode_name(mode)); }

std::string configuration(const Format& format, Mode mode, bool flush, bool saturate) {
  std::ostringstream out;
  out << format.name << " (e" << format.exp_bits << "m" << format.man_bits << " family "
      << static_cast<int>(format.family) << " bias " << format.bias() << ") mode " << mode_text(mode) << " flush_subnormals " << flush << " saturate " << saturate;
  return out.str();
}

bool same_double(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

void MismatchLog::fail(const std::string& message) {
  ++checked_;
  ++failures_;
  if (first_.size() < keep_) first_.push_back(message);
}

void MismatchLog::require_none() const {
  std::ostringstream out;
  out << what_ << ": " << failures_ << " mismatches in " << checked_ << " comparisons";
  for (const auto& m : first_) out << "\n  " << m;
  if (failures_ > first_.size()) out << "\n  ...";
  if (failures_ == 0) {
    std::printf("%s\n", out.str().c_str());
    SUCCEED(out.str());
  } else {
    FAIL_CHECK(out.str());
  }
}

static std::string show_result(const ref::Result& r) {
  std::ostringstream out;
  out << "bits " << show_bits(r.bits) << " value " << show(r.value) << " inexact " << r.inexact << " overflow "
      << r.overflow << " underflow " << r.underflow;
  return out.str();
}

static std::string show_rounded(const fp::Rounded& r) {
  std::ostringstream out;
  out << "bits " << show_bits(r.bits) << " value " << show(r.value) << " inexact " << r.inexact << " overflow "
      << r.overflow << " underflow " << r.underflow;
  return out.str();
}

void compare_rounded(MismatchLog& values, MismatchLog& flags, const Describe& input, const Format& format, Mode mode,
                     bool flush, bool saturate, const fp::Rounded& got, const std::vector<ref::Result>& want,
                     bool finite_nonzero_input) {
  // With sr two candidates may share bits (saturated overflow) but not flags: prefer the one
  // whose flags match.
  const ref::Result* match = nullptr;
  for (const auto& w : want) {
    if (w.bits != got.bits) continue;
    const bool flags_match = w.inexact == got.inexact && w.overflow == got.overflow && w.underflow == got.underflow;
    if (match == nullptr || flags_match) match = &w;
  }
  auto describe = [&] {
    std::ostringstream out;
    out << "round " << configuration(format, mode, flush, saturate) << " x = " << input() << ": expected ";
    for (size_t i = 0; i < want.size(); ++i) out << (i ? " or " : "") << "{" << show_result(want[i]) << "}";
    out << "; got {" << show_rounded(got) << "}";
    return out.str();
  };
  const bool value_ok =
      match != nullptr && same_double(got.value, match->value) && std::signbit(got.value) == std::signbit(match->value);
  if (!value_ok) {
    values.fail(describe());
    return;
  }
  values.pass();
  if (!finite_nonzero_input) return;
  if (got.inexact != match->inexact || got.overflow != match->overflow || got.underflow != match->underflow)
    flags.fail(describe());
  else
    flags.pass();
}

void compare_double(MismatchLog& log, const Describe& input, const Format& format, Mode mode, bool flush, bool saturate,
                    double got, const std::vector<ref::Result>& want) {
  for (const auto& w : want)
    if (same_double(got, w.value)) return log.pass();
  std::ostringstream out;
  out << configuration(format, mode, flush, saturate) << " " << input() << ": expected ";
  for (size_t i = 0; i < want.size(); ++i) out << (i ? " or " : "") << show(want[i].value);
  out << "; got " << show(got);
  log.fail(out.str());
}

void compare_exact_every_mode(MismatchLog& values, MismatchLog& flags, const Describe& input,
                              const std::function<ref::Exact(Mode)>& want,
                              const std::function<fp::ExactValue(Mode)>& got_value,
                              const std::function<fp::Rounded(const Format&, const fp::RoundingOptions&)>& got_rounded) {
  fp::CounterRng stream(1);
  for (Mode mode : fp::all_modes) {
    const ref::Exact exact = want(mode);
    guarded(values, input, [&] {
      const std::string d = exact_difference(got_value(mode), exact);
      if (d.empty())
        values.pass();
      else
        values.fail(input() + " value(" + mode_text(mode) + "): " + d);
    });
    for (const Format& format : output_formats()) {
      for (bool flush : {false, true}) {
        for (bool saturate : {false, true}) {
          const auto rounded = ref::round(exact, format, mode, flush, saturate);
          const fp::RoundingOptions options{mode, flush, saturate, &stream};
          guarded(values, input, [&] {
            compare_rounded(values, flags, input, format, mode, flush, saturate, got_rounded(format, options), rounded,
                            exact.kind == ref::Kind::finite);
          });
        }
      }
    }
  }
}

std::string exact_difference(const fp::ExactValue& got, const ref::Exact& want) {
  const ref::Kind kind = kind_of(got.kind);
  bool same = kind == want.kind && (kind == ref::Kind::nan || got.negative == want.negative);
  if (same && kind == ref::Kind::finite) {
    const ref::Top64 t = ref::top64(want.value.get());
    same = got.exponent == t.exponent && got.significand == t.significand && got.sticky == t.sticky;
  }
  if (same) return {};
  return "expected " + show(want) + ", got " + show(got);
}

void for_each_rounding(const std::function<void(Mode, bool, bool)>& fn, bool include_sr) {
  for (Mode mode : deterministic_modes)
    for (bool flush : {false, true})
      for (bool saturate : {false, true}) fn(mode, flush, saturate);
  if (include_sr)
    for (bool flush : {false, true})
      for (bool saturate : {false, true}) fn(Mode::sr, flush, saturate);
}

double random_significand(std::mt19937_64& rng, int exponent) {
  const uint64_t m = (rng() >> 11) | (uint64_t{1} << 52);
  return std::ldexp(static_cast<double>(m), exponent - 52);
}

double random_finite_bits(std::mt19937_64& rng) {
  for (;;) {
    const double x = std::bit_cast<double>(rng());
    if (std::isfinite(x)) return x;
  }
}

}  // namespace fplab::test
