// One comparison harness for every test regime (MPFR's tests style): the code under test and
// the MPFR reference (fp/mpfr_reference.hpp) are run on the same input, and disagreements are
// counted and the first few printed with the whole configuration, instead of one Catch
// assertion per comparison (millions of them would dominate the run time).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/mpfr_reference.hpp"
#include "fp/round.hpp"
#include "fp/rounding.hpp"

namespace fplab::test {

using fp::Format;
using fp::Mode;
namespace ref = fp::reference;

inline constexpr Mode deterministic_modes[] = {Mode::rne, Mode::rna, Mode::rz, Mode::ru, Mode::rd, Mode::ro};

// Formats by name, built directly from their fields so a bug in parse_format() or the named
// constructors cannot hide one in rounding.
Format format_named(const std::string& name);
std::vector<Format> output_formats();  // fp64 fp32 tf32 bf16 fp16 e4m3 e5m2
// The ML formats of ml_dtypes beyond those: e4m3ieee, the fnuz family, MX FP6/FP4, e8m0.
std::vector<Format> narrow_ml_formats();
// Any eXmY, IEEE-like or finite-only with an fn NaN (named "eXmYfn").
Format custom_format(int exp_bits, int man_bits, bool finite_only);

// "0x1.8p+3 (12)": exact and readable.
std::string show(double x);
std::string show_bits(uint64_t bits);
std::string show(const fp::ExactValue& v);
std::string show(const ref::Exact& v);
std::string mode_text(Mode mode);  // our own spelling, not fp::mode_name()
std::string configuration(const Format& format, Mode mode, bool flush, bool saturate);

// Same double, NaNs equal to each other whatever their payload and sign.
bool same_double(double a, double b);

// A lazily formatted description of an input.
using Describe = std::function<std::string()>;

class MismatchLog {
 public:
  explicit MismatchLog(std::string what, size_t keep = 25) : what_(std::move(what)), keep_(keep) {}
  void pass() { ++checked_; }
  void fail(const std::string& message);
  size_t failures() const { return failures_; }
  size_t checked() const { return checked_; }
  // Prints a summary (and the first failures) and makes the current test case fail if any.
  void require_none() const;

 private:
  std::string what_;
  size_t keep_;
  size_t checked_ = 0, failures_ = 0;
  std::vector<std::string> first_;
};

// Compares a Rounded from fp/ with the reference results (one for deterministic modes, the two
// allowed for sr): value and bits into `values`, the flags into `flags` (kept apart so that a
// flag disagreement cannot hide a wrong value). Flags are compared only for finite nonzero
// inputs.
void compare_rounded(MismatchLog& values, MismatchLog& flags, const Describe& input, const Format& format, Mode mode,
                     bool flush, bool saturate, const fp::Rounded& got, const std::vector<ref::Result>& want,
                     bool finite_nonzero_input);

// Compares a double result (add/mul/fma) with the reference results; NaNs by NaN-ness only.
void compare_double(MismatchLog& log, const Describe& input, const Format& format, Mode mode, bool flush, bool saturate,
                    double got, const std::vector<ref::Result>& want);

// Empty when the ExactValue describes the reference value (NaN sign not compared).
std::string exact_difference(const fp::ExactValue& got, const ref::Exact& want);

// The whole check of an exact result against the reference, for every mode: got_value(mode)
// against want(mode), and got_rounded(format, options) against the reference's rounding in every
// output format with flush and saturate on and off (sr drawing from one stream).
void compare_exact_every_mode(MismatchLog& values, MismatchLog& flags, const Describe& input,
                              const std::function<ref::Exact(Mode)>& want,
                              const std::function<fp::ExactValue(Mode)>& got_value,
                              const std::function<fp::Rounded(const Format&, const fp::RoundingOptions&)>& got_rounded);

// Runs fn, turning an exception into a failure of the log; context() names the input (built
// only on failure: formatting dominates the run time otherwise).
template <class Context, class Fn>
bool guarded(MismatchLog& log, Context&& context, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    log.fail(std::string(context()) + ": threw " + e.what());
  } catch (...) {
    log.fail(std::string(context()) + ": threw a non-std exception");
  }
  return false;
}

// Every (mode, flush, saturate) for deterministic modes, then sr, calling fn.
void for_each_rounding(const std::function<void(Mode, bool flush, bool saturate)>& fn, bool include_sr = true);

// A double with the given number of random significand bits (top bit set) times 2^exponent.
double random_significand(std::mt19937_64& rng, int exponent);
// A finite double with uniformly random bits.
double random_finite_bits(std::mt19937_64& rng);

}  // namespace fplab::test
