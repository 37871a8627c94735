// The fused step of sim/tensor_core.hpp.
//
// Assumptions: host doubles are IEEE binary64; every term is a double or an exact product of
// two doubles (at most 106 significant bits, held in unsigned __int128). The cut terms are
// summed in a signed __int128 when they provably fit (each is below 2^(F + 2), there are
// n + 1 of them), otherwise in an fp::SuperAccumulator; either way the sum is exact and
// fp::round_exact() rounds it once.
#include "sim/tensor_core.hpp"

#include <tuple>

#include "sim/tensor_core_models.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>

#include "fp/exact_value.hpp"
#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"
#include "fp/ieee_bits.hpp"

namespace fplab::sim {
namespace {

using u128 = unsigned __int128;
using i128 = __int128;

// A nonzero finite term: (-1)^negative * magnitude * 2^scale, aligned by `exponent`.
struct Term {
  bool negative;
  u128 magnitude;
  int scale;
  int exponent;
};

struct Split {
  bool negative;
  uint64_t significand;  // integer, < 2^53, nonzero
  int scale;
  int exponent;  // floor(log2 |x|)
};

Split split(double x) {
  const fp::DoubleParts parts = fp::split_double(x);
  const int exponent = parts.scale + std::bit_width(parts.significand) - 1;
  return {parts.negative, parts.significand, parts.scale, exponent};
}

}  // namespace

void check_fused_add_spec(const FusedAddSpec& spec) {
  if (spec.products < 1) throw std::invalid_argument("fused add: products must be at least 1");
  if (spec.fraction_bits < 0) throw std::invalid_argument("fused add: fraction_bits must be >= 0");
  if (spec.input_mode == fp::Mode::sr || spec.output_mode == fp::Mode::sr)
    throw std::invalid_argument("fused add: stochastic rounding is not a tensor-core mode");
}

namespace {

double round_special(fp::ExactValue special, const FusedAddSpec& spec) {
  return fp::round_exact(special, spec.output, {spec.output_mode}).value;
}

// The cut of one term to the grid 2^grid: an integer count of grid units, signed.
// Exact when the term lies on the grid already (scale >= grid).
struct Cut {
  u128 units;
  bool negative;
};

Cut cut(const Term& t, int grid, AlignedTruncation truncation) {
  if (t.scale >= grid) return {t.magnitude << (t.scale - grid), t.negative};
  const int shift = grid - t.scale;
  const u128 kept = shift >= 128 ? 0 : t.magnitude >> shift;
  const bool dropped = shift >= 128 ? true : (kept << shift) != t.magnitude;
  // Flooring a negative value moves its magnitude up by one unit when bits were dropped.
  const bool bump = truncation == AlignedTruncation::toward_minus_infinity && t.negative && dropped;
  return {kept + (bump ? 1 : 0), t.negative};
}

}  // namespace

double fused_multiply_add(double acc, std::span<const double> a, std::span<const double> b, const FusedAddSpec& spec) {
  check_fused_add_spec(spec);
  if (a.size() != b.size()) throw std::invalid_argument("fused add: a and b differ in length");

  const fp::RoundingOptions to_input{spec.input_mode};
  const int input_emin = spec.input.emin();
  std::vector<Term> terms;
  terms.reserve(a.size() + 1);
  bool nan = std::isnan(acc), pos_inf = acc == INFINITY, neg_inf = acc == -INFINITY;
  // Read only when every term is zero: which signs of zero came.
  bool positive_zero = acc == 0 && !std::signbit(acc), negative_zero = acc == 0 && std::signbit(acc);

  for (size_t i = 0; i < a.size(); ++i) {
    const double x = fp::round_double(a[i], spec.input, to_input).value;
    const double y = fp::round_double(b[i], spec.input, to_input).value;
    if (std::isnan(x) || std::isnan(y)) {
      nan = true;
      continue;
    }
    const bool negative = std::signbit(x) != std::signbit(y);
    if (std::isinf(x) || std::isinf(y)) {
      if (x == 0 || y == 0)
        nan = true;
      else
        (negative ? neg_inf : pos_inf) = true;
      continue;
    }
    if (x == 0 || y == 0) {
      (negative ? negative_zero : positive_zero) = true;
      continue;
    }
    const Split sx = split(x), sy = split(y);
    terms.push_back({negative, u128(sx.significand) * sy.significand, sx.scale + sy.scale,
                     std::max(sx.exponent, input_emin) + std::max(sy.exponent, input_emin)});
  }
  if (nan || (pos_inf && neg_inf)) return round_special(fp::ExactValue::nan(), spec);
  if (pos_inf || neg_inf) return round_special(fp::ExactValue::infinity(neg_inf), spec);

  std::optional<Term> accumulator;
  if (acc != 0) {
    const Split s = split(acc);
    accumulator = Term{s.negative, s.significand, s.scale, std::max(s.exponent, spec.output.emin())};
  }
  if (terms.empty() && !accumulator) {
    // Only zeros: IEEE's sign rule (zeros of one sign keep it; of both signs -0 only in rd).
    const bool negative = negative_zero && (!positive_zero || spec.output_mode == fp::Mode::rd);
    return round_special(fp::ExactValue::zero(negative), spec);
  }

  // The grid: F fraction bits below the largest reference exponent.
  int largest = std::numeric_limits<int>::min();
  for (const Term& t : terms) largest = std::max(largest, t.exponent);
  if (accumulator && (spec.accumulator_in_alignment || terms.empty()))
    largest = std::max(largest, accumulator->exponent);
  const int64_t grid64 = int64_t{largest} - spec.fraction_bits;
  const bool cut_accumulator = spec.accumulator_in_alignment;

  const size_t count = terms.size() + (accumulator ? 1 : 0);
  const bool fits_int128 = spec.fraction_bits + 2 + std::bit_width(count) <= 125 && (!accumulator || cut_accumulator);
  fp::ExactValue sum;
  if (fits_int128) {
    const int grid = static_cast<int>(grid64);
    i128 total = 0;
    auto add = [&](const Term& t) {
      const Cut c = cut(t, grid, spec.truncation);
      total += c.negative ? -i128(c.units) : i128(c.units);
    };
    for (const Term& t : terms) add(t);
    if (accumulator) add(*accumulator);
    const bool negative = total < 0;
    sum = fp::ExactValue::from_integer(negative, negative ? u128(-total) : u128(total), grid, false);
  } else {
    fp::SuperAccumulator exact;
    auto add = [&](const Term& t, bool cut_it) {
      if (!cut_it || t.scale >= grid64) return exact.add_scaled(t.negative, t.magnitude, t.scale);
      const Cut c = cut(t, static_cast<int>(grid64), spec.truncation);
      exact.add_scaled(c.negative, c.units, static_cast<int>(grid64));
    };
    for (const Term& t : terms) add(t, true);
    if (accumulator) add(*accumulator, cut_accumulator);
    sum = exact.value(spec.output_mode);
  }
  // Nonzero terms that cancel: +0, or -0 when rounding down (IEEE 754, 6.3).
  if (sum.kind == fp::ExactValue::Kind::zero) sum = fp::ExactValue::zero(spec.output_mode == fp::Mode::rd);
  return fp::round_exact(sum, spec.output, {spec.output_mode}).value;
}

double fused_dot(double acc, std::span<const double> a, std::span<const double> b, const FusedAddSpec& spec) {
  check_fused_add_spec(spec);
  if (a.size() != b.size()) throw std::invalid_argument("fused dot: a and b differ in length");
  const size_t n = static_cast<size_t>(spec.products);
  for (size_t k = 0; k < a.size(); k += n) {
    const size_t len = std::min(n, a.size() - k);
    acc = fused_multiply_add(acc, a.subspan(k, len), b.subspan(k, len), spec);
  }
  return acc;
}

std::pair<fp::Format, fp::Mode> fused_input_conversion(Reducer::Input input) {
  switch (input) {
    case Reducer::Input::none:
      return {fp::fp64(), fp::Mode::rne};
    case Reducer::Input::tf32:
      return {fp::tf32(), fp::Mode::rz};
    case Reducer::Input::tf32rne:
      return {fp::tf32(), fp::Mode::rne};
    case Reducer::Input::tf32rna:
      return {fp::tf32(), fp::Mode::rna};
    case Reducer::Input::bf16:
      return {fp::bf16(), fp::Mode::rne};
    case Reducer::Input::fp16:
      return {fp::fp16(), fp::Mode::rne};
    case Reducer::Input::e4m3:
      return {fp::e4m3(), fp::Mode::rne};
    case Reducer::Input::e5m2:
      return {fp::e5m2(), fp::Mode::rne};
    case Reducer::Input::mxe4m3:
    case Reducer::Input::mxe5m2:
    case Reducer::Input::mxe3m2:
    case Reducer::Input::mxe2m3:
    case Reducer::Input::mxe2m1:
      // A block's scale depends on its 32 neighbours along K, which one value cannot know: the dot
      // and GEMM paths quantize the factors before the schedule runs (sim/mx_factors.hpp) and hand
      // the steps the dequantized values; every other caller (a reduction of values) ends here.
      throw std::invalid_argument(std::string("fused(N,F,") + to_string(input) +
                                  "): MX block scaling needs the factors of a dot product or GEMM; a reduction "
                                  "of values has none");
  }
  return {fp::fp64(), fp::Mode::rne};
}

FusedAddSpec tensor_core_model(std::string_view name) {
  const TensorCoreModel* model = find_tensor_core_model(name);
  if (model == nullptr)
    throw fp::FormatError("unknown tensor-core model '" + std::string(name) + "' (known: " + tensor_core_model_list() +
                          ")");
  FusedAddSpec s;
  s.products = model->products;
  s.fraction_bits = model->fraction_bits;
  std::tie(s.input, s.input_mode) = fused_input_conversion(model->input);
  s.output = fp::parse_format(model->accumulator);
  s.output_mode = fp::Mode::rz;
  return s;
}

std::vector<std::string> tensor_core_model_names() {
  std::vector<std::string> names;
  for (const auto& m : tensor_core_models()) names.emplace_back(m.name);
  return names;
}

}  // namespace fplab::sim
