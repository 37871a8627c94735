// Seeded test data for reductions: `--gen DIST:N` on the command line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fplab::sim {

// DIST is one of:
//   normal     standard normal values
//   uniform    uniform in [0, 1)
//   lognormal  exp(N(0, 4)) with random signs: wide dynamic range, mixed signs
//   cancel     pairs x, -x (|x| ~ lognormal) plus a few small terms: the exact sum is tiny
//              next to the terms, so every rounding error shows
//   ones       all 1 (orders differ only once the count exceeds the format's precision)
// Throws fp::FormatError for a bad spec ("normal:1000" is a good one; N from 1 to 10^9).
std::vector<double> generate(std::string_view spec, uint64_t seed);
std::vector<std::string> distributions();

}  // namespace fplab::sim
