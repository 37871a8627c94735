// A reduction's trace (sim/schedule_trace.hpp) for people and programs: the table that
// `fplab sum --trace` and `fplab reduce --trace` print, and the JSON they and fplab serve give.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "sim/schedule_trace.hpp"

namespace fplab::app {

// Traces are refused past this many terms: every step is a line (a page of JSON each).
inline constexpr size_t kMaxTracedTerms = 100000;

// {"result": "s3", "steps": [{"step": "s1", "kind": "addition", "label": "+", "operands": [{"name",
// "value", "value_text"}...], "exact_text", "value", "value_text", "error", "error_text",
// "error_is_exact", "depth", and for fused steps "grid_exponent" and "aligned": [{"name", "input",
// "kept", "dropped"} ...]}]}. Numbers that are not finite are null beside their text.
nlohmann::json trace_json(const sim::ScheduleTrace& trace);

// One line per step, a fused step's aligned terms beneath it, each line starting with `indent`.
void print_trace(const sim::ScheduleTrace& trace, const char* indent);

}  // namespace fplab::app
