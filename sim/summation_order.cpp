#include "sim/summation_order.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "fp/arithmetic.hpp"
#include "fp/counter_rng.hpp"
#include "sim/engine.hpp"
#include "sim/presets.hpp"

namespace fplab::sim {

using fp::FormatError;

std::string SummationOrder::name() const {
  switch (kind) {
    case Kind::seq:
      return "seq";
    case Kind::rev:
      return "rev";
    case Kind::pairwise:
      return "pairwise";
    case Kind::sorted_asc:
      return "sorted-asc";
    case Kind::sorted_desc:
      return "sorted-desc";
    case Kind::random:
      return "random:" + std::to_string(permutations);
    case Kind::schedule:
      return text;
  }
  return "?";
}

SummationOrder parse_summation_order(std::string_view text) {
  using K = SummationOrder::Kind;
  const auto order_of = [](K kind, int permutations = 0) {
    SummationOrder order;
    order.kind = kind;
    order.permutations = permutations;
    return order;
  };
  if (text == "seq") return order_of(K::seq);
  if (text == "rev") return order_of(K::rev);
  if (text == "pairwise") return order_of(K::pairwise);
  if (text == "sorted-asc") return order_of(K::sorted_asc);
  if (text == "sorted-desc") return order_of(K::sorted_desc);
  if (text.starts_with("random:")) {
    int n = 0;
    const auto digits = text.substr(7);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc{} || end != digits.data() + digits.size() || n < 1 || n > 10'000'000)
      throw FormatError("order '" + std::string(text) + "': random:N needs a whole N from 1 to 10000000");
    return order_of(K::random, n);
  }
  // A word that is no preset and has none of the grammar's punctuation was meant as a name:
  // list the names rather than report it as an unknown grouping.
  if (text.empty() || text.find_first_of(":|(") == std::string_view::npos) {
    bool preset = false;
    std::string names;
    for (const auto& p : presets()) {
      preset = preset || p.name.substr(0, p.name.find('(')) == text;  // "splitk" is splitk(4)
      names += (names.empty() ? "" : ", ") + p.name;
    }
    if (!preset)
      throw FormatError((text.empty() ? std::string("an empty order") : "unknown order '" + std::string(text) + "'") +
                        " (known: sorted-asc, sorted-desc, random:N, " + names +
                        ", or a schedule such as 'contig(8):seq | all:tree')");
  }
  SummationOrder order = order_of(K::schedule);
  order.schedule = parse_schedule(text);
  order.text = std::string(text);
  return order;
}

std::vector<SummationOrder> parse_summation_orders(std::string_view list) {
  std::vector<SummationOrder> orders;
  for (const auto& item : split_schedule_list(list)) orders.push_back(parse_summation_order(item));
  return orders;
}

double fold_left(std::span<const double> terms, const fp::Format& f, const fp::RoundingOptions& o) {
  if (terms.empty()) return 0.0;
  double acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) acc = fp::add(acc, terms[i], f, o);
  return acc;
}

double fold_right(std::span<const double> terms, const fp::Format& f, const fp::RoundingOptions& o) {
  if (terms.empty()) return 0.0;
  double acc = terms.back();
  for (size_t i = terms.size() - 1; i-- > 0;) acc = fp::add(terms[i], acc, f, o);
  return acc;
}

double pairwise_tree(std::span<const double> terms, const fp::Format& f, const fp::RoundingOptions& o) {
  if (terms.empty()) return 0.0;
  if (terms.size() == 1) return terms[0];
  const size_t half = terms.size() / 2;
  // The left subtree first, named: as arguments the two calls could run in either order, and
  // under sr that order decides which rounding gets which random draw (the trace goes left first).
  const double left = pairwise_tree(terms.first(half), f, o);
  const double right = pairwise_tree(terms.subspan(half), f, o);
  return fp::add(left, right, f, o);
}

std::vector<double> sum_in_order(const SummationOrder& order, std::span<const double> terms, const fp::Format& f,
                                 const fp::RoundingOptions& o, uint64_t seed) {
  using K = SummationOrder::Kind;
  std::vector<double> sorted(terms.begin(), terms.end());
  switch (order.kind) {
    case K::seq:
      return {fold_left(terms, f, o)};
    case K::rev:
      return {fold_right(terms, f, o)};
    case K::pairwise:
      return {pairwise_tree(terms, f, o)};
    case K::sorted_asc:
    case K::sorted_desc:
      // Stable, so equal magnitudes keep their input order and the result is well defined.
      std::stable_sort(sorted.begin(), sorted.end(), [&](double a, double b) {
        return order.kind == K::sorted_asc ? std::fabs(a) < std::fabs(b) : std::fabs(a) > std::fabs(b);
      });
      return {fold_left(sorted, f, o)};
    case K::random: {
      std::vector<double> results;
      results.reserve(order.permutations);
      for (int k = 0; k < order.permutations; ++k) {
        fp::CounterRng rng(seed, static_cast<uint64_t>(k));
        std::copy(terms.begin(), terms.end(), sorted.begin());
        for (size_t i = sorted.size(); i > 1; --i) std::swap(sorted[i - 1], sorted[rng.below(i)]);  // Fisher-Yates
        results.push_back(fold_left(sorted, f, o));
      }
      return results;
    }
    case K::schedule: {
      Arithmetic arithmetic;
      arithmetic.format = f;
      arithmetic.mode = o.mode;
      arithmetic.flush_subnormals = o.flush_subnormals;
      arithmetic.saturate = o.saturate;
      arithmetic.sr_bits = o.sr_bits;
      return {reduce(order.schedule, terms, arithmetic, NoiseKey{seed})};
    }
  }
  return {};
}

OrderAsSchedule order_as_schedule(const SummationOrder& order, std::span<const double> terms, uint64_t seed) {
  using K = SummationOrder::Kind;
  OrderAsSchedule out;
  out.schedule = "all:seq";
  out.order_of_terms.resize(terms.size());
  std::iota(out.order_of_terms.begin(), out.order_of_terms.end(), size_t{0});
  auto& index = out.order_of_terms;
  switch (order.kind) {
    case K::seq:
      break;
    case K::rev:
      out.schedule = "all:rev";
      break;
    case K::pairwise:
      out.schedule = "all:tree";
      break;
    case K::sorted_asc:
    case K::sorted_desc:
      std::stable_sort(index.begin(), index.end(), [&](size_t a, size_t b) {
        return order.kind == K::sorted_asc ? std::fabs(terms[a]) < std::fabs(terms[b])
                                           : std::fabs(terms[a]) > std::fabs(terms[b]);
      });
      break;
    case K::random: {
      fp::CounterRng rng(seed, 0);  // permutation 0, drawn as sum_in_order draws it
      for (size_t i = index.size(); i > 1; --i) std::swap(index[i - 1], index[rng.below(i)]);
      break;
    }
    case K::schedule:
      out.schedule = to_string(order.schedule);
      out.key = NoiseKey{seed};
      break;
  }
  return out;
}

}  // namespace fplab::sim
