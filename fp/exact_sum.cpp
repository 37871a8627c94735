#include "fp/exact_sum.hpp"

#include <bit>
#include <cstdint>

#include "fp/exponent_buckets.hpp"
#include "fp/extracted_sum.hpp"
#include "fp/ieee_bits.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::fp {
namespace {

// Below this many terms the bucket pass's fixed costs (a flush over the exponents seen, a
// second accumulator) outweigh a superaccumulator update per term.
constexpr size_t kFewTerms = 32;

template <class T>
ExactValue term_by_term(const T* x, size_t n, size_t step, Mode mode) {
  SuperAccumulator acc;
  for (size_t i = 0; i < n; ++i) acc.add(static_cast<double>(x[i * step]));
  return acc.value(mode);
}

template <int kSignificandBits, class T>
ExactValue bucketed(const T* x, size_t n, size_t step, Mode mode) {
  // Specials, and sums that cancel to exactly zero (whose sign depends on which terms were
  // zeros), follow IEEE rules that the term-by-term path states directly.
  if (n < kFewTerms) return term_by_term(x, n, step, mode);
  SuperAccumulator acc;
  // Contiguous terms get loops the compiler vectorises (extraction where their exponents allow,
  // else buckets); strided ones would be gathers.
  const bool finite =
      step == 1 ? detail::ExtractedSum<kSignificandBits>::add(acc, x, n)
                : detail::ExponentBuckets<kSignificandBits>::add(acc, n, [x, step](size_t i) {
                    return std::bit_cast<uint64_t>(static_cast<double>(x[i * step]));
                  });
  if (!finite) return term_by_term(x, n, step, mode);
  ExactValue value = acc.value(mode);
  if (value.kind == ExactValue::Kind::zero) return term_by_term(x, n, step, mode);
  return value;
}

}  // namespace

ExactValue exact_sum_of(const double* x, size_t n, size_t step, Mode mode) { return bucketed<53>(x, n, step, mode); }

// A float's significand, as a double's, has its low 29 bits zero.
ExactValue exact_sum_of(const float* x, size_t n, size_t step, Mode mode) { return bucketed<24>(x, n, step, mode); }

}  // namespace fplab::fp
