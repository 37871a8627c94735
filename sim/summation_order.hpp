// The summation orders of `fplab sum`: whole-list orderings of a sum, each addition rounded to
// the working format. The teaching vocabulary (seq, rev, pairwise, sorted-asc, sorted-desc,
// random:N) is kept beside the schedule language of sim/, which says every other order: any
// preset or schedule text is an order too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

struct SummationOrder {
  enum class Kind { seq, rev, pairwise, sorted_asc, sorted_desc, random, schedule };
  Kind kind = Kind::seq;
  int permutations = 0;  // for random
  std::string text;      // for schedule: as given, without surrounding spaces
  Schedule schedule;     // for schedule
  std::string name() const;
};

// "seq", "rev", "pairwise", "sorted-asc", "sorted-desc", "random:N" (1 <= N <= 10^7), or a
// schedule preset or text ("numpy", "cuda-naive-sum(256,64)", "contig(8):seq | all:tree").
// Throws fp::FormatError for an unknown word (listing every name), sim::ScheduleError for a
// preset or schedule that does not parse. The list is cut as sim::split_schedule_list cuts it.
SummationOrder parse_summation_order(std::string_view text);
std::vector<SummationOrder> parse_summation_orders(std::string_view comma_separated);

// The sum of `terms` in the given order, every addition rounded to `format` with `options`.
// One value, or one per permutation for random:N (permutation k drawn from (seed, k)). A schedule
// order is sim::reduce with the noise key {seed}: its atomic and shuffle steps and, under sr, its
// roundings draw from that key, not from options.stream.
std::vector<double> sum_in_order(const SummationOrder& order, std::span<const double> terms, const fp::Format& format,
                                 const fp::RoundingOptions& options, uint64_t seed);

// The order as a schedule over the terms rearranged: sum_in_order's value (for random:N, that of
// permutation 0) is the schedule's reduction of terms[order_of_terms[0]], terms[order_of_terms[1]], ...
// What `fplab sum --trace` traces.
struct OrderAsSchedule {
  std::string schedule;                // "all:seq", "all:rev", "all:tree", or a schedule order's canonical text
  std::vector<size_t> order_of_terms;  // the term at each position
  // Schedule orders only: the key their random steps and sr roundings draw from (trace with
  // key->rounding_stream()); the others round with the caller's stream.
  std::optional<NoiseKey> key;
};
OrderAsSchedule order_as_schedule(const SummationOrder& order, std::span<const double> terms, uint64_t seed);

// Left fold ((t0 + t1) + t2) + ...; right fold t0 + (t1 + (... + t(n-1))); balanced tree with
// the first floor(n/2) terms on the left. Empty input sums to +0.
double fold_left(std::span<const double> terms, const fp::Format& format, const fp::RoundingOptions& options);
double fold_right(std::span<const double> terms, const fp::Format& format, const fp::RoundingOptions& options);
double pairwise_tree(std::span<const double> terms, const fp::Format& format, const fp::RoundingOptions& options);

}  // namespace fplab::sim
