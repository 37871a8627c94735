// What the teaching page (fplab serve) asks and is told: numbers, a format, a rounding and some
// orders in; the exact sum, each order's result and error, its traced tree, a histogram over runs
// for nondeterministic orders, and one sentence on why the worst order lost what it lost. Every
// value comes from the evaluators `fplab reduce` uses (sim::reduce, sim::trace_schedule): the
// same data and schedule give the same bits.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fplab::app {

// An order the page offers: a key for URLs, words for people, a schedule for the evaluator.
struct TeachOrder {
  std::string key, label, schedule, explanation;
};
const std::vector<TeachOrder>& teach_orders();

// Limits that keep every answer under about a second on one core.
inline constexpr size_t kTeachMaxTerms = 100000;
inline constexpr size_t kTeachMaxNumberChars = 2'000'000;
inline constexpr size_t kTeachMaxTracedTerms = 256;  // trees drawn, steps listed
inline constexpr size_t kTeachMaxRuns = 1000;        // histogram runs of a nondeterministic order

// The page's catalogue: orders, formats, roundings, generators and the limits above.
nlohmann::json teach_catalogue();

// Request: {"numbers": "1e8 1 -1e8 1" (whitespace, comma or semicolon separated) or "gen":
// "cancel:16" with "seed", "format", "mode", "orders": [keys], "custom": schedule text (key
// "custom"), "impl_seed" (the run shown for nondeterministic orders), "runs" (histogram size)}.
// Throws UsageError with one line for anything it cannot answer.
nlohmann::json teach_explain(const nlohmann::json& request);

}  // namespace fplab::app
